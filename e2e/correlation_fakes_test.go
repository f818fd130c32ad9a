// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"cmp"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/stepwire"
)

// One GPU timeline, played by a fake engine loop (step datagrams in the
// step wire format, internal/stepwire) and a fake CUPTI library (frames in
// the CUPTI wire format, internal/cuptiwire, in the order
// native/cupti/cupti_inject.c sends them: hello, identity, devices, then
// launches before the kernel records of the buffer that holds them). Every
// kernel's place on the GPU is simulated here, so the test knows each
// step's figures before the collector computes them.

// fakeKernel is one kernel a launch runs: its name and GPU time.
type fakeKernel struct {
	name string
	dur  time.Duration
}

// fakeLaunch is one launch at an offset into its step; a graph launch runs
// its kernels back to back under one correlation id.
type fakeLaunch struct {
	at      time.Duration
	graph   bool
	kernels []fakeKernel
}

// fakeProcess is a process that runs kernels: the engine process itself
// (tensor parallelism 1) or an executor worker whose parent is the engine.
type fakeProcess struct {
	pid, ppid uint32
	uuid      [16]byte
}

// fakeStep is one engine step: its time range, the tokens each request got,
// and the launches each process made during it.
type fakeStep struct {
	index      uint64
	start, end time.Time
	tokens     []fakeTokens
	launches   map[uint32][]fakeLaunch // by pid
}

type fakeTokens struct {
	id string
	n  int64
}

// fakeReplica is one engine: a server with its instance id, the engine
// process that runs its loop, the processes that run its kernels.
type fakeReplica struct {
	instance  string
	enginePID uint32
	procs     []fakeProcess
	steps     []fakeStep
}

// ranKernel is a kernel as the simulated GPU ran it.
type ranKernel struct {
	corr       uint32
	name       string
	start, end uint64 // Unix ns
	graph      bool
	step       uint64
}

// launchRec is a launch as the library's callback saw it.
type launchRec struct {
	l    cuptiwire.Launch
	step uint64
}

// simulate runs every launch of p on one GPU: a kernel starts 20 µs after
// its launch or when the GPU is free, whichever is later; a graph's kernels
// follow each other 2 µs apart.
func (r *fakeReplica) simulate(p fakeProcess) ([]launchRec, []ranKernel) {
	var launches []launchRec
	var ran []ranKernel
	corr := uint32(100)
	var free uint64
	for _, st := range r.steps {
		for _, l := range st.launches[p.pid] {
			corr++
			t := uint64(st.start.Add(l.at).UnixNano())
			kind := cuptiwire.LaunchKindKernel
			if l.graph {
				kind = cuptiwire.LaunchKindGraph
			}
			launches = append(launches, launchRec{cuptiwire.Launch{Kind: kind, Domain: 2, Correlation: corr, ThreadID: p.pid, Time: t}, st.index})
			at := max(t+20_000, free)
			for i, k := range l.kernels {
				if i > 0 {
					at = free + 2_000
				}
				end := at + uint64(k.dur)
				ran = append(ran, ranKernel{corr: corr, name: k.name, start: at, end: end, graph: l.graph, step: st.index})
				free = end
			}
		}
	}
	return launches, ran
}

// cuptiRecords is one part of a stream after hello, identity and device:
// names not yet defined (ids in names, kept across parts of one
// connection), launches, a mark past markAt, kernels.
func cuptiRecords(launches []launchRec, ran []ranKernel, markAt time.Time, names map[string]uint32) []byte {
	var b []byte
	ls := make([]cuptiwire.Launch, 0, len(launches)+1)
	for _, l := range launches {
		ls = append(ls, l.l)
	}
	ls = append(ls, cuptiwire.Launch{Kind: cuptiwire.LaunchKindMark, Time: uint64(markAt.UnixNano())})
	b = cuptiwire.AppendLaunches(b, ls)
	recs := make([]cuptiwire.Record, 0, len(ran))
	for _, k := range ran {
		id, ok := names[k.name]
		if !ok {
			id = uint32(len(names) + 1)
			names[k.name] = id
			b = cuptiwire.AppendString(b, id, k.name)
		}
		r := cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Stream: 7, Start: k.start, End: k.end, Name: id, Correlation: k.corr}
		if k.graph {
			r.GraphID, r.GraphNode = 5, uint64(len(recs)+1)
		}
		recs = append(recs, r)
	}
	return cuptiwire.AppendRecords2(b, recs)
}

// sendSteps sends the replica's steps (those selected by keep) as the hook
// would, one datagram each.
func sendSteps(t *testing.T, sock, host string, r *fakeReplica, keep func(fakeStep) bool) {
	t.Helper()
	c, err := net.Dial("unixgram", sock)
	require.NoError(t, err)
	defer c.Close()
	for _, st := range r.steps {
		if !keep(st) {
			continue
		}
		s := stepwire.Step{
			Engine: stepwire.EngineVLLM, PID: r.enginePID, Index: st.index,
			StartUnixNs: st.start.UnixNano(), EndUnixNs: st.end.UnixNano(),
			ServiceName: "vllm", EngineVersion: "0.11.0", Host: host,
			InstanceID: r.instance, // wire v3: the hook reads OTEL_RESOURCE_ATTRIBUTES
		}
		for _, tk := range st.tokens {
			s.RequestIDs = append(s.RequestIDs, tk.id)
			s.RequestTokens = append(s.RequestTokens, tk.n)
			s.DecodeRequests++
			s.ScheduledTokens += uint32(tk.n)
		}
		_, err := c.Write(stepwire.Encode(&s))
		require.NoError(t, err)
	}
}

// stepFigures are a step's expected GPU figures, from the simulation.
type stepFigures struct {
	kernelNS, busyNS, idleBeforeNS, idleNS uint64
	count, graphs                          int64
	categories                             map[string]uint64
	top                                    []string
}

// expectSteps computes each step's figures from what the simulated GPUs
// ran: kernel time and count, the union of each device's kernels summed
// over devices, the idle gap before the first kernel (from the later of the
// device's previous kernel and the step's start) and that plus the gaps
// between the step's kernels, largest over devices.
func expectSteps(r *fakeReplica, ran map[uint32][]ranKernel) map[uint64]stepFigures {
	out := map[uint64]stepFigures{}
	byName := map[uint64]map[string]uint64{}
	for _, st := range r.steps {
		f := stepFigures{categories: map[string]uint64{}}
		byName[st.index] = map[string]uint64{}
		for _, p := range r.procs {
			// The collector sees kernels in the order the library sends them:
			// the previous end is the latest end among those sent before.
			var seen, prevEnd, first, last, busy, end uint64
			graphs := map[uint32]bool{}
			n := 0
			for _, k := range ran[p.pid] {
				if k.step == st.index {
					d := k.end - k.start
					f.kernelNS += d
					f.count++
					f.categories[kernelclass.Default.Classify(k.name)] += d
					byName[st.index][kernelclass.Shorten(k.name)] += d
					if k.graph {
						graphs[k.corr] = true
					}
					if n == 0 {
						first, prevEnd = k.start, seen
					}
					last = max(last, k.end)
					if k.start >= end {
						busy += d
					} else if k.end > end {
						busy += k.end - end
					}
					end = max(end, k.end)
					n++
				}
				seen = max(seen, k.end)
			}
			if n == 0 {
				continue
			}
			f.graphs += int64(len(graphs))
			f.busyNS += busy
			from := max(prevEnd, uint64(st.start.UnixNano()))
			before := uint64(0)
			if first > from {
				before = first - from
			}
			f.idleBeforeNS = max(f.idleBeforeNS, before)
			f.idleNS = max(f.idleNS, before+(last-first-busy))
		}
		names := slices.Collect(maps.Keys(byName[st.index]))
		slices.SortFunc(names, func(a, b string) int {
			return cmp.Or(cmp.Compare(byName[st.index][b], byName[st.index][a]), cmp.Compare(a, b))
		})
		f.top = names[:min(3, len(names))]
		out[st.index] = f
	}
	return out
}
