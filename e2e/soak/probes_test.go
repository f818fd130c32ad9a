// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// series is one Prometheus text-format sample line: name{labels} value.
type series map[string]float64

// scrape reads a Prometheus text endpoint into name{labels} → value.
func scrape(addr string) (series, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	out := series{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, s.Err()
}

// sum adds every sample of metric name whose labels contain each of match
// (label="value" pairs as written in the text format).
func (s series) sum(name string, match ...string) float64 {
	var total float64
next:
	for k, v := range s {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		for _, m := range match {
			if !strings.Contains(labels, m) {
				continue next
			}
		}
		total += v
	}
	return total
}

// dropCounters returns every counter whose name says it counts lost,
// refused or bad input, summed over labels, zero ones included.
func (s series) dropCounters() map[string]float64 {
	out := map[string]float64{}
	for k, v := range s {
		n, _, _ := strings.Cut(k, "{")
		for _, w := range []string{"drop", "refused", "failed", "bad_", "rejected", "overflow", "evict", "truncated", "timeouts", "enqueue_failed"} {
			if strings.Contains(n, w) {
				out[n] += v
				break
			}
		}
	}
	return out
}

// proc samples a process's RSS and CPU time from /proc.
type proc struct {
	pid    int
	mu     sync.Mutex
	maxRSS int64 // bytes
	atMax  map[string]int64
	rss    []int64
	stop   chan struct{}
	done   chan struct{}
}

var pageTicks = 100.0 // USER_HZ on Linux

func newProc(pid int) *proc {
	p := &proc{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			p.sample()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *proc) close() {
	close(p.stop)
	<-p.done
}

func (p *proc) sample() {
	st, err := readStatus(p.pid)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.rss = append(p.rss, st["VmRSS"])
	if st["VmRSS"] > p.maxRSS {
		p.atMax = st
	}
	p.maxRSS = max(p.maxRSS, st["VmRSS"])
	p.mu.Unlock()
}

// readStatus returns the kB fields of /proc/PID/status, in bytes.
func readStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, " kB")), 10, 64)
		if err == nil {
			out[k] = kb << 10
		}
	}
	return out, nil
}

// resetPeak restarts the kernel's peak RSS (VmHWM) for the process, so
// that peakRSS covers one phase; writing 5 to clear_refs does that
// (Documentation/filesystems/proc.rst).
func (p *proc) resetPeak() error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid), []byte("5"), 0)
}

// peakRSS returns the kernel's peak RSS (VmHWM) since the start or the last
// resetPeak, in MiB: every page the process held at once, not a sample.
func (p *proc) peakRSS() (float64, error) {
	st, err := readStatus(p.pid)
	if err != nil {
		return 0, err
	}
	hwm, ok := st["VmHWM"]
	if !ok {
		return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.pid)
	}
	return float64(hwm) / (1 << 20), nil
}

// cpuSeconds returns the process's user+system CPU time so far.
func (p *proc) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / pageTicks
}

// resetSamples forgets the samples so far, so that rssStats and atPeak
// cover one phase.
func (p *proc) resetSamples() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rss, p.maxRSS, p.atMax = nil, 0, nil
}

// atPeak returns the anonymous and the file-backed RSS, in MiB, at the
// highest sample.
func (p *proc) atPeak() (anon, file float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(p.atMax["RssAnon"]) / (1 << 20), float64(p.atMax["RssFile"]) / (1 << 20)
}

// rssStats returns the median and the highest RSS sampled, in MiB.
func (p *proc) rssStats() (median, peak float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rss) == 0 {
		return 0, 0
	}
	s := append([]int64(nil), p.rss...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2]) / (1 << 20), float64(p.maxRSS) / (1 << 20)
}
