// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"github.com/inferprof/inferprof/internal/gpuwindow"
)

// The steps of a trace. torch.profiler's profiler.step() opens a
// "ProfilerStep#N" user annotation on the thread that calls it (PyTorch
// torch/profiler/profiler.py, profile.step: record_function
// "ProfilerStep#" + str(step_num)); vLLM's GPU worker calls it once per
// engine step (vllm/v1/worker/gpu_worker.py annotate_profile, vllm-project/vllm
// @35d5cda1). A kernel belongs to the step whose time range holds the
// cuda_runtime or cuda_driver event that launched it on any thread of the
// annotation's process: autograd runs the backward pass on its own device
// threads (torch/csrc/autograd/engine.cpp, Engine::thread_init), which
// launch most of a training step's kernels, and they carry no annotation of
// their own. The kernel's args.correlation is its launch's (libkineto
// output_json.cpp writes the correlation id on both).

// profilerStep is the annotation's name prefix.
var profilerStep = []byte("ProfilerStep#")

// StepNames names and classifies the trace's kernel name ids for step
// figures; the receiver's handler implements it.
type StepNames interface {
	// KernelName is the series name of a kernel name id.
	KernelName(id uint32) string
	// Category is the kernel category of a name id.
	Category(id uint32) string
}

// Step is one ProfilerStep#N annotation and the GPU work it launched.
type Step struct {
	Index      uint64 // N
	PID, TID   int64
	Start, End uint64 // Unix ns
	Result     gpuwindow.Result
}

type annotation struct {
	index      uint64
	pid, tid   int64
	start, end uint64 // relative to the base time
}

type launchEvent struct {
	ts       uint64
	pid, tid int64
	corr     int64
}

type stepKernel struct {
	start, end uint64
	corr       int64
	device     uint16
	name       uint32
}

// stepCollector keeps what step figures need while a file is read: the
// annotations, the launches and the kernels, in compact form, up to a cap.
type stepCollector struct {
	anns     []annotation
	launches []launchEvent
	kernels  []stepKernel
	max      int
	full     bool
}

func (c *stepCollector) add(ev *Event, name uint32) {
	if len(c.launches)+len(c.kernels)+len(c.anns) >= c.max {
		c.full = true
		return
	}
	switch ev.Cat {
	case CatUserAnnotation:
		if n, ok := bytes.CutPrefix(ev.Name, profilerStep); ok && ev.HasTS && ev.HasDur {
			if i, err := strconv.ParseUint(string(n), 10, 64); err == nil {
				c.anns = append(c.anns, annotation{index: i, pid: ev.PID, tid: ev.TID, start: ev.TS, end: ev.TS + ev.Dur})
			}
		}
	case CatRuntime, CatDriver:
		if ev.Corr > 0 && ev.HasTS {
			c.launches = append(c.launches, launchEvent{ts: ev.TS, pid: ev.PID, tid: ev.TID, corr: ev.Corr})
		}
	case CatKernel:
		if ev.Corr > 0 && ev.HasTS && ev.HasDur {
			dev := uint16(0)
			if ev.Device >= 0 && ev.Device < 0xFFFF {
				dev = uint16(ev.Device)
			}
			c.kernels = append(c.kernels, stepKernel{start: ev.TS, end: ev.TS + ev.Dur, corr: ev.Corr, device: dev, name: name})
		}
	}
}

// annIndex finds the annotation whose time range holds a launch: the
// annotations of one process (or of the whole file) in start order, with
// the latest end among each prefix, so a lookup stops at the first
// annotation that ends before the launch and every earlier one does too.
type annIndex struct {
	idx    []int    // into stepCollector.anns, in start order
	maxEnd []uint64 // maxEnd[j] = max end of idx[:j+1]
}

func (x *annIndex) add(anns []annotation, i int) {
	e := anns[i].end
	if n := len(x.maxEnd); n > 0 {
		e = max(e, x.maxEnd[n-1])
	}
	x.idx = append(x.idx, i)
	x.maxEnd = append(x.maxEnd, e)
}

// of is the latest-starting annotation that holds time ts, -1 if none.
func (x *annIndex) of(anns []annotation, ts uint64) int {
	if x == nil {
		return -1
	}
	j, _ := slices.BinarySearchFunc(x.idx, ts, func(i int, t uint64) int {
		if anns[i].start <= t {
			return -1
		}
		return 1
	})
	for j--; j >= 0 && x.maxEnd[j] >= ts; j-- {
		if a := anns[x.idx[j]]; ts <= a.end {
			return x.idx[j]
		}
	}
	return -1
}

// nameResolver adapts StepNames to gpuwindow.Resolver (one source).
type nameResolver struct{ n StepNames }

func (r nameResolver) KernelName(id uint32) string { return r.n.KernelName(id) }

// steps computes each annotation's figures; base is added to every time.
func (c *stepCollector) steps(base uint64, names StepNames, top int) []Step {
	if len(c.anns) == 0 {
		return nil
	}
	slices.SortFunc(c.anns, func(a, b annotation) int { return cmp.Compare(a.start, b.start) })
	// Each launch to the annotation of its process that holds it, whatever
	// the thread. A trace whose launch events carry another pid than its
	// annotations (CUPTI and the profiler saw the process through different
	// pid namespaces; the Triton example in testdata is one) has no launch
	// in any annotation's process: its launches are matched by time alone.
	var all annIndex
	byPID := map[int64]*annIndex{}
	for i, a := range c.anns {
		all.add(c.anns, i)
		x := byPID[a.pid]
		if x == nil {
			x = &annIndex{}
			byPID[a.pid] = x
		}
		x.add(c.anns, i)
	}
	stepOf := make(map[int64]int, len(c.launches))
	launched := make([]int, len(c.anns))
	for _, samePID := range []bool{true, false} {
		for _, l := range c.launches {
			x := &all
			if samePID {
				x = byPID[l.pid]
			}
			if i := x.of(c.anns, l.ts); i >= 0 {
				stepOf[l.corr] = i
				launched[i]++
			}
		}
		if len(stepOf) > 0 {
			break
		}
	}
	// Kernels in each device's start order, so each sees the device's
	// previous kernel end, as a live stream does.
	slices.SortFunc(c.kernels, func(a, b stepKernel) int {
		return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(a.start, b.start))
	})
	var cats gpuwindow.Categories
	catOf := map[uint32]uint8{}
	accs := make([]gpuwindow.Accumulator, len(c.anns))
	var prevEnd uint64
	for i, k := range c.kernels {
		if i == 0 || k.device != c.kernels[i-1].device {
			prevEnd = 0
		}
		if s, ok := stepOf[k.corr]; ok {
			cat, seen := catOf[k.name]
			if !seen {
				cat = cats.ID(names.Category(k.name))
				catOf[k.name] = cat
			}
			pe := uint64(0)
			if prevEnd > 0 {
				pe = base + prevEnd
			}
			accs[s].Add(0, &gpuwindow.Kernel{
				Correlation: uint32(k.corr), Device: k.device, Start: base + k.start, End: base + k.end,
				Series: k.name, Category: cat,
			}, pe, base+c.anns[s].start)
		}
		prevEnd = max(prevEnd, k.end)
	}
	res := nameResolver{names}
	out := make([]Step, len(c.anns))
	for i, a := range c.anns {
		st := Step{Index: a.index, PID: a.pid, TID: a.tid, Start: base + a.start, End: base + a.end}
		switch {
		case accs[i].Empty() && launched[i] == 0:
			st.Result.Missing = gpuwindow.MissingNoLaunches
		case accs[i].Empty():
			st.Result.Missing = gpuwindow.MissingNoKernels
		default:
			st.Result.Figures = accs[i].Figures(top, func(uint32) gpuwindow.Resolver { return res }, &cats)
			if c.full {
				st.Result.Missing = gpuwindow.MissingIncomplete
			}
		}
		out[i] = st
	}
	return out
}
