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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			p.mu.Lock()
			p.rss = append(p.rss, kb<<10)
			p.maxRSS = max(p.maxRSS, kb<<10)
			p.mu.Unlock()
		}
	}
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
