// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpuwindow ties CUDA kernel executions to the engine steps that
// launched them, by launch rather than by time overlap.
//
// Three streams meet here. Engine steps (from the engine_step receiver,
// registered by the inference processor) say when each step ran. Launches
// (from the CUPTI injection library's launch callbacks, through the cupti
// receiver) say which correlation id a kernel or graph launch got and when,
// on which thread. Kernel records (CUPTI activity, through the cupti
// receiver) carry the correlation id of the launch that started them; the
// kernels inside a CUDA graph carry the graph launch's. A launch belongs to
// the step whose launch window holds its time; a kernel belongs to the step
// of its launch, wherever on the GPU timeline it ran: with vLLM's async
// scheduling step N+1's CPU work overlaps step N's kernels, so overlap
// would give N's kernels to N+1.
//
// Kernels are summed into their step as they arrive (Accumulator); only
// launches and kernels whose step or launch has not arrived yet are held,
// in bounded queues. A step is finalized when every launch it made has its
// records and the library says no launch of its window is still on the
// way, or at its deadline with what arrived. A Window is safe for
// concurrent use.
package gpuwindow // import "github.com/inferprof/inferprof/internal/gpuwindow"

import (
	"time"
)

// Config bounds a Window. Zero fields take the defaults of NewDefaultConfig.
type Config struct {
	// Quiet is how long a step whose launches all have records waits for
	// more records (the other nodes of a CUDA graph) before it is final.
	// Default 50ms.
	Quiet time.Duration
	// MaxSteps caps the steps waiting to be finalized, all engines; past it
	// the oldest is finalized early with what it has. Default 65536.
	MaxSteps int
	// MaxPendingLaunches caps, per CUPTI source, the launches held until the
	// step that made them arrives (24 bytes each). Default 262144.
	MaxPendingLaunches int
	// MaxPendingKernels caps, per CUPTI source, the kernel records held
	// until their launch is placed (48 bytes each). Default 262144.
	MaxPendingKernels int
	// MaxRuns caps, per source, the correlation-id ranges remembered (24
	// bytes each); they also name the step of a sampled kernel span after
	// the step was finalized. Default 65536.
	MaxRuns int
	// MaxSources caps the CUPTI sources (engine processes). Default 1024.
	MaxSources int
	// MaxEngines caps the engine processes that sent steps. Default 1024.
	MaxEngines int
	// TopKernels is how many kernels each step names. Default 3.
	TopKernels int
}

// NewDefaultConfig returns the default bounds.
func NewDefaultConfig() Config {
	return Config{
		Quiet:              50 * time.Millisecond,
		MaxSteps:           1 << 16,
		MaxPendingLaunches: 1 << 18,
		MaxPendingKernels:  1 << 18,
		MaxRuns:            1 << 16,
		MaxSources:         1024,
		MaxEngines:         1024,
		TopKernels:         3,
	}
}

func (c Config) withDefaults() Config {
	d := NewDefaultConfig()
	if c.Quiet <= 0 {
		c.Quiet = d.Quiet
	}
	for _, f := range []struct{ v, d *int }{
		{&c.MaxSteps, &d.MaxSteps}, {&c.MaxPendingLaunches, &d.MaxPendingLaunches},
		{&c.MaxPendingKernels, &d.MaxPendingKernels}, {&c.MaxRuns, &d.MaxRuns},
		{&c.MaxSources, &d.MaxSources}, {&c.MaxEngines, &d.MaxEngines}, {&c.TopKernels, &d.TopKernels},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return c
}

// EngineKey names the engine process that sent steps: the hook's host.name
// and process.pid, and the service.instance.id both the hook and the CUPTI
// library read from OTEL_RESOURCE_ATTRIBUTES (empty when unset).
type EngineKey struct {
	Host     string
	PID      uint32
	Instance string
}

// SourceInfo names a CUPTI source: the process the injection library runs
// in, and its parent. A source serves the engine whose PID is its own (the
// engine runs the model in its own process) or its parent's (executor
// workers, one process per GPU under tensor parallelism), on the same host,
// when both instance ids are set and equal or one is unset.
type SourceInfo struct {
	Host     string
	PID      uint32
	PPID     uint32
	Instance string
	// Sampled says the library records only part of the kernels (launch
	// rate limit or duty cycle): steps it serves are marked so.
	Sampled bool
}

// Link names the span of a step, so kernel spans can point at it.
type Link struct {
	TraceID [16]byte
	SpanID  [8]byte
	Index   uint64 // the step's index in its engine
}

// StepInfo registers a step.
type StepInfo struct {
	Engine EngineKey
	Index  uint64
	// ThreadID, when not 0, is the engine thread: launches from other
	// threads of the engine's own process are not the step's. Worker
	// processes' launches count from any thread.
	ThreadID uint32
	// LaunchStart and LaunchEnd are the step's time range in Unix ns (the
	// step span's start and end). Without Windows they bound when the
	// step launched its kernels; worker processes that send no launch
	// marks are matched by them too.
	LaunchStart, LaunchEnd int64
	// Windows, when set, are the intervals in which the engine process
	// itself launched the step's batch (step wire version 4). Launches of
	// the engine's own process count by them instead of by the time range:
	// under async scheduling the next batch launches inside the range.
	Windows []LaunchWindow
	// Batch is the step's batch number (0: unknown). Executor workers'
	// launch marks (Window.Mark) name it.
	Batch uint64
	// ScheduledTokens is the batch's scheduled token count; a worker mark
	// of the same batch number must carry the same count.
	ScheduledTokens uint32
	// Deadline is when the step is finalized with what arrived by then.
	Deadline time.Time
	Link     Link
	// Ref is the caller's handle, returned with the step's Result.
	Ref any
	// Owner is who collects the step (Collect's owner): two processors
	// sharing the window each get their own steps.
	Owner any
}

// LaunchWindow is an interval, in Unix ns, in which one thread launched a
// batch's GPU work.
type LaunchWindow struct {
	Start, End int64
	// ThreadID is the launching thread (gettid); 0 matches any thread.
	ThreadID uint32
}

// Missing says why a step's GPU figures are absent or partial.
type Missing string

// Reasons.
const (
	MissingNone       Missing = ""
	MissingNoSource   Missing = "no_source"   // no CUPTI stream from the engine's processes
	MissingNoLaunches Missing = "no_launches" // the stream saw no kernel launch in the step
	MissingNoKernels  Missing = "no_kernels"  // launches, but no kernel record arrived by the deadline
	MissingIncomplete Missing = "incomplete"  // some launches' records did not arrive by the deadline
	MissingSampled    Missing = "sampled"     // the library samples launches: figures cover part of them
	MissingEvicted    Missing = "evicted"     // finalized early: too many steps waiting
)

// Result is a finalized step.
type Result struct {
	Ref     any
	Missing Missing
	Figures Figures
}

// Stats are the window's counters since New.
type Stats struct {
	Sources, Engines, PendingSteps  int
	PendingLaunches, PendingKernels int
	Steps                           uint64 // finalized
	Kernels                         uint64 // kernel records summed into a step
	KernelsOutside                  uint64 // launched outside every step (warm-up, another thread)
	KernelsUnmatched                uint64 // no launch record carried their correlation id
	KernelsLate                     uint64 // their step was already final
	KernelsDropped                  uint64 // the pending queue was full
	LaunchesOutside                 uint64
	LaunchesDropped                 uint64
	StepsEvicted                    uint64
	SourcesRefused                  uint64 // MaxSources reached
	Marks                           uint64 // launch marks taken (Window.Mark)
	MarksMismatched                 uint64 // marks whose batch's token count differs from its step's
	MarksDropped                    uint64 // marks forgotten at a bound
}

// Counts are one source's records that did not end in a step, since it
// opened, for its receiver's telemetry.
type Counts struct {
	KernelsOutside   uint64 // launched outside every step, or by another thread
	KernelsUnmatched uint64 // no launch record carried their correlation id
	KernelsLate      uint64 // their step was already final
	KernelsDropped   uint64 // the pending queue was full
	LaunchesDropped  uint64
}
