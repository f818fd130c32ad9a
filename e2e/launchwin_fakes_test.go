// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/kernelclass"
)

// The real step hook drives a fake engine (integrations/python/tests/fakes,
// drive.py --gpu) whose batches are launched on a fake GPU: every launch is
// recorded where the engine's code launches it, on the thread that does,
// with the batch it belongs to (tests/fakes/gpu.py), and its kernels run
// on a simulated device that the engine waits on, so the GPU runs behind
// the CPU as on a real one. This file is the fake CUPTI library's side:
// it replays those records to the collector in the CUPTI wire format
// (internal/cuptiwire, in native/cupti/cupti_inject.c's order: hello,
// identity, device, then launches before the kernel records), and computes
// what each step must get from the batch tags alone.

// gpuLaunch and gpuKernel are what tests/fakes/gpu.py logs.
type gpuLaunch struct {
	Corr   uint32 `json:"corr"`
	Time   uint64 `json:"time"`
	Thread uint32 `json:"thread"`
	Graph  bool   `json:"graph"`
	Batch  uint64 `json:"batch"`
}

type gpuKernel struct {
	Corr       uint32 `json:"corr"`
	Name       string `json:"name"`
	Start, End uint64
	Graph      bool   `json:"graph"`
	Batch      uint64 `json:"batch"`
}

func (k *gpuKernel) UnmarshalJSON(b []byte) error {
	type plain gpuKernel
	var v struct {
		plain
		Start uint64 `json:"start"`
		End   uint64 `json:"end"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*k = gpuKernel(v.plain)
	k.Start, k.End = v.Start, v.End
	return nil
}

type gpuLog struct {
	Launches []gpuLaunch `json:"launches"`
	Kernels  []gpuKernel `json:"kernels"`
}

// launchBatch is a batch the fake engine ran, from its own bookkeeping.
type launchBatch struct {
	Batch         uint64   `json:"batch"`
	RequestIDs    []string `json:"request_ids"`
	RequestTokens []int64  `json:"request_tokens"`
}

// launchDrive is what drive.py --gpu prints when it is done.
type launchDrive struct {
	Steps   []launchBatch `json:"steps"`
	PID     uint32        `json:"pid"`
	GPU     gpuLog        `json:"gpu"`
	Workers []struct {
		PID uint32 `json:"pid"`
		GPU gpuLog `json:"gpu"`
	} `json:"workers"`
	Stats struct {
		Sent, Dropped int
	} `json:"stats"`
}

// gpuProc is a process that runs kernels: the engine process, or an
// executor worker (its parent is the engine).
type gpuProc struct {
	pid, ppid uint32
	conn      net.Conn
	names     map[string]uint32
	log       gpuLog
	warmEnd   uint64
}

// launchRun is one run of drive.py --gpu --wait under a collector: the
// fake CUPTI streams of the processes that launch its kernels open first,
// then the engine runs, then those streams send everything it launched.
type launchRun struct {
	out   launchDrive
	procs []*gpuProc
}

func runLaunchScenario(t *testing.T, stepSock, cuptiSock, instance string, sink *e2etest.Sink, env []string, args ...string) *launchRun {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	py := filepath.Join(e2etest.RepoRoot(), "integrations", "python")
	cmd := exec.Command("python3", append([]string{filepath.Join(py, "tests", "fakes", "drive.py"), "--gpu", "--wait"}, args...)...)
	host, err := os.Hostname()
	require.NoError(t, err)
	cmd.Env = append(append(os.Environ(),
		"PYTHONPATH="+filepath.Join(py, "bootstrap")+string(os.PathListSeparator)+filepath.Join(py, "tests", "fakes"),
		"INFERPROF_STEP_ENDPOINT="+stepSock,
		"OTEL_SERVICE_NAME=launch-svc",
		"OTEL_RESOURCE_ATTRIBUTES=service.instance.id="+instance), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(stdout)
	line, err := r.ReadBytes('\n')
	require.NoError(t, err, stderr.String())
	var ready struct {
		PID     uint32   `json:"pid"`
		Workers []uint32 `json:"workers"`
	}
	require.NoError(t, json.Unmarshal(line, &ready), string(line))

	run := &launchRun{}
	if len(ready.Workers) == 0 {
		run.procs = []*gpuProc{{pid: ready.PID, ppid: uint32(os.Getpid())}}
	}
	for _, w := range ready.Workers {
		run.procs = append(run.procs, &gpuProc{pid: w, ppid: ready.PID})
	}
	// Each stream opens as the library's does, and sends one kernel long
	// before the run, so the cupti receiver's metrics show it has read it.
	warm := uint64(time.Now().Add(-time.Minute).UnixNano())
	for i, p := range run.procs {
		conn, err := net.Dial("unix", cuptiSock)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		p.conn, p.names, p.warmEnd = conn, map[string]uint32{}, warm+1000
		b := cuptiwire.AppendHelloFlags(nil, p.pid, cuptiwire.HelloLaunches, uint64(time.Now().UnixNano()), host)
		b = cuptiwire.AppendIdentity(b, p.ppid, instance, "launch-svc")
		b = cuptiwire.AppendDevice(b, cuptiwire.Device{Ordinal: 0, UUID: [16]byte{0xc0, byte(i), 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}})
		b = append(b, p.records(nil, []gpuKernel{{Corr: 1 << 30, Name: "warm_up", Start: warm, End: p.warmEnd}}, time.Time{})...)
		_, err = conn.Write(b)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, p := range run.procs {
			if cuptiKernelSeconds(sink.Metrics.AllMetrics(), int64(p.pid)) <= 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)

	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), stderr.String())
	require.NoError(t, json.Unmarshal(rest, &run.out), string(rest))
	require.NotEmpty(t, run.out.Steps)
	require.Equal(t, len(run.out.Steps), run.out.Stats.Sent, "every step reached the collector; stderr %s", stderr.String())
	if len(run.out.Workers) == 0 {
		run.procs[0].log = run.out.GPU
	}
	for _, w := range run.out.Workers {
		for _, p := range run.procs {
			if p.pid == w.PID {
				p.log = w.GPU
			}
		}
	}
	for _, p := range run.procs {
		require.NotEmpty(t, p.log.Launches, p.pid)
	}
	return run
}

// lockedBuffer collects a child's stderr while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// send hands the collector every launch and kernel the process made, and a
// mark that every launch up to now was sent.
func (p *gpuProc) send(t *testing.T) {
	t.Helper()
	_, err := p.conn.Write(p.records(p.log.Launches, p.log.Kernels, time.Now()))
	require.NoError(t, err)
}

// records is one part of a stream after hello, identity and device: names
// not yet defined, launches and a mark (when markAt is set), kernels.
func (p *gpuProc) records(launches []gpuLaunch, kernels []gpuKernel, markAt time.Time) []byte {
	var b []byte
	if !markAt.IsZero() {
		ls := make([]cuptiwire.Launch, 0, len(launches)+1)
		for _, l := range launches {
			kind := cuptiwire.LaunchKindKernel
			if l.Graph {
				kind = cuptiwire.LaunchKindGraph
			}
			ls = append(ls, cuptiwire.Launch{Kind: kind, Domain: 2, Correlation: l.Corr, ThreadID: l.Thread, Time: l.Time})
		}
		ls = append(ls, cuptiwire.Launch{Kind: cuptiwire.LaunchKindMark, Time: uint64(markAt.UnixNano())})
		b = cuptiwire.AppendLaunches(b, ls)
	}
	recs := make([]cuptiwire.Record, 0, len(kernels))
	for _, k := range kernels {
		id, ok := p.names[k.Name]
		if !ok {
			id = uint32(len(p.names) + 1)
			p.names[k.Name] = id
			b = cuptiwire.AppendString(b, id, k.Name)
		}
		r := cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Stream: 7, Start: k.Start, End: k.End, Name: id, Correlation: k.Corr}
		if k.Graph {
			r.GraphID, r.GraphNode = 5, uint64(len(recs)+1)
		}
		recs = append(recs, r)
	}
	return cuptiwire.AppendRecords2(b, recs)
}

// batchFigures computes what the step of batch must carry from the kernels
// tagged with it: kernel time and count, graphs, busy time per device, the
// categories and top kernels, and the idle gap before its first kernel on
// each device from the later of the device's previous kernel and from(pid),
// the batch's first launch window in that process.
func batchFigures(procs []*gpuProc, batch uint64, from func(pid uint32) uint64) stepFigures {
	f := stepFigures{categories: map[string]uint64{}}
	byName := map[string]uint64{}
	for _, p := range procs {
		seen := p.warmEnd
		var prevEnd, first, last, busy, end uint64
		graphs := map[uint32]bool{}
		n := 0
		for _, k := range p.log.Kernels {
			if k.Batch == batch {
				d := k.End - k.Start
				f.kernelNS += d
				f.count++
				f.categories[kernelclass.Default.Classify(k.Name)] += d
				byName[kernelclass.Shorten(k.Name)] += d
				if k.Graph {
					graphs[k.Corr] = true
				}
				if n == 0 {
					first, prevEnd = k.Start, seen
				}
				last = max(last, k.End)
				if k.Start >= end {
					busy += d
				} else if k.End > end {
					busy += k.End - end
				}
				end = max(end, k.End)
				n++
			}
			seen = max(seen, k.End)
		}
		if n == 0 {
			continue
		}
		f.graphs += int64(len(graphs))
		f.busyNS += busy
		start := max(prevEnd, from(p.pid))
		before := uint64(0)
		if first > start {
			before = first - start
		}
		f.idleBeforeNS = max(f.idleBeforeNS, before)
		f.idleNS = max(f.idleNS, before+(last-first-busy))
	}
	names := slices.Collect(maps.Keys(byName))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(byName[b], byName[a]), cmp.Compare(a, b)) })
	f.top = names[:min(3, len(names))]
	return f
}
