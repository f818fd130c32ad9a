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
	"slices"
	"sync"
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

// Window is the correlation state of one collector, held by its step_store
// extension (extension/stepstoreextension).
type Window struct {
	mu      sync.Mutex
	cfg     Config
	cats    Categories
	sources []*source // by slot; nil = free
	engines map[EngineKey]*engine
	marks   map[procKey]*markProc // worker processes that send launch marks
	pending []*step               // waiting to be finalized, in registration order
	accs    []*Accumulator
	seq     uint64 // numbers steps in registration order
	stats   Stats
}

// New returns an empty window.
func New(cfg Config) *Window {
	return &Window{cfg: cfg.withDefaults(), engines: map[EngineKey]*engine{}, marks: map[procKey]*markProc{}}
}

// CategoryID returns the id of a kernel category name for Kernel.Category.
func (w *Window) CategoryID(name string) uint8 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cats.ID(name)
}

// Stats returns the window's counters and sizes.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Engines = len(w.engines)
	s.PendingSteps = len(w.pending)
	for _, src := range w.sources {
		if src != nil {
			s.Sources++
			s.PendingLaunches += len(src.pendL)
			s.PendingKernels += len(src.pendK)
		}
	}
	return s
}

type engine struct {
	key     EngineKey
	steps   []*step // not final, by LaunchStart
	maxRE   int64   // latest LaunchEnd (range end) registered
	ivs     []ival  // launch windows of the steps not final, by start
	maxLE   int64   // latest launch window end registered
	maxSpan int64   // longest launch window registered
	// Per launching thread, the latest start of a step's first window on
	// it: a step still to come launches on that thread only after it.
	// Windows of one thread come in batch order but not in time order (the
	// SGLang overlap loop prepares batch N+1 before it processes N), so a
	// launch in a gap before maxLE may still be a later step's.
	threadFirst map[uint32]int64
	bySeq       map[uint64]*step
	maxSeq      uint64 // highest batch number registered
	sources     []*source
	used        uint64 // w.seq when it last registered a step
}

// ival is one launch window of a step in its engine's own process.
type ival struct {
	start, end int64
	tid        uint32
	st         *step
}

type step struct {
	seq      uint64
	info     StepInfo
	eng      *engine
	acc      *Accumulator
	nPlain   int // kernel launches placed in the step
	nGraph   int // graph launches placed in the step
	gotPlain int // kernel records of plain launches
	last     time.Time
	start    int64 // first launch in the engine's own process: its first window's start
	end      int64 // last window's end in the engine's own process
	sampled  bool
	evicted  bool
	mismatch bool // a worker's mark of its batch carried another token count
	done     bool
}

// AddStep registers a step. It returns false with MissingNoSource when no
// CUPTI source serves the engine: the caller reports the step at once.
func (w *Window) AddStep(si StepInfo) (bool, Missing) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.engines[si.Engine]
	if e == nil {
		if len(w.engines) >= w.cfg.MaxEngines && !w.evictEngineLocked() {
			return false, MissingNoSource
		}
		e = &engine{key: si.Engine}
		w.engines[si.Engine] = e
		for _, s := range w.sources {
			if s != nil && s.eng == nil && !s.closed && s.serves(si.Engine) {
				w.attachLocked(s, e)
			}
		}
	}
	w.seq++
	e.used = w.seq
	if !e.hasOpenSource() {
		return false, MissingNoSource
	}
	if len(w.pending) >= w.cfg.MaxSteps {
		w.stats.StepsEvicted++
		w.pending[0].evicted = true
	}
	st := &step{seq: w.seq, info: si, eng: e, acc: w.takeAcc()}
	i := len(e.steps)
	for i > 0 && e.steps[i-1].info.LaunchStart > si.LaunchStart {
		i--
	}
	e.steps = slices.Insert(e.steps, i, st)
	e.maxRE = max(e.maxRE, si.LaunchEnd)
	e.addWindows(st)
	if si.Batch != 0 {
		if e.bySeq == nil {
			e.bySeq = map[uint64]*step{}
		}
		e.bySeq[si.Batch] = st
		e.maxSeq = max(e.maxSeq, si.Batch)
	}
	w.pending = append(w.pending, st)
	for _, s := range e.sources {
		if s.sampled {
			st.sampled = true
		}
		w.placePendingLocked(s)
	}
	return true, MissingNone
}

func (e *engine) hasOpenSource() bool {
	for _, s := range e.sources {
		if !s.closed {
			return true
		}
	}
	return false
}

// addWindows indexes st's launch windows in its engine's own process: its
// Windows, or its time range without them.
func (e *engine) addWindows(st *step) {
	ws := st.info.Windows
	if len(ws) == 0 {
		ws = []LaunchWindow{{Start: st.info.LaunchStart, End: st.info.LaunchEnd, ThreadID: st.info.ThreadID}}
	}
	st.start, st.end = ws[0].Start, ws[0].End
	first := map[uint32]int64{}
	for _, lw := range ws {
		st.start, st.end = min(st.start, lw.Start), max(st.end, lw.End)
		if f, ok := first[lw.ThreadID]; !ok || lw.Start < f {
			first[lw.ThreadID] = lw.Start
		}
		iv := ival{start: lw.Start, end: lw.End, tid: lw.ThreadID, st: st}
		i := len(e.ivs)
		for i > 0 && e.ivs[i-1].start > iv.start {
			i--
		}
		e.ivs = slices.Insert(e.ivs, i, iv)
		e.maxLE = max(e.maxLE, iv.end)
		e.maxSpan = max(e.maxSpan, iv.end-iv.start)
	}
	if e.threadFirst == nil {
		e.threadFirst = map[uint32]int64{}
	}
	for tid, f := range first {
		if old, ok := e.threadFirst[tid]; ok || len(e.threadFirst) < maxLaunchThreads {
			e.threadFirst[tid] = max(old, f)
		}
	}
}

// maxLaunchThreads bounds the threads an engine's windows are tracked for;
// past it a thread's launches are held only after every window.
const maxLaunchThreads = 64

// mayCome reports whether a launch at t on thread tid that no window holds
// may still belong to a step not registered yet.
func (e *engine) mayCome(t int64, tid uint32) bool {
	if f, ok := e.threadFirst[tid]; ok && tid != 0 {
		return t > f
	}
	return t > e.maxLE
}

// findOwn returns the step whose launch window in the engine's own process
// holds a launch at t on thread tid, nil if none does.
func (e *engine) findOwn(t int64, tid uint32) *step {
	i, _ := slices.BinarySearchFunc(e.ivs, t, func(iv ival, t int64) int {
		if iv.start <= t {
			return -1
		}
		return 1
	})
	// Windows of one thread never overlap; those of several threads (a
	// forward thread beside the scheduler's) may, so look back as far as
	// the longest window reaches.
	for i--; i >= 0 && e.ivs[i].start >= t-e.maxSpan; i-- {
		iv := &e.ivs[i]
		if t <= iv.end && (iv.tid == 0 || tid == 0 || iv.tid == tid) {
			return iv.st
		}
	}
	return nil
}

// find returns the step whose time range holds t, nil if none does.
func (e *engine) find(t int64) *step {
	i, _ := slices.BinarySearchFunc(e.steps, t, func(s *step, t int64) int {
		if s.info.LaunchStart <= t {
			return -1
		}
		return 1
	})
	for i--; i >= 0; i-- {
		s := e.steps[i]
		if t <= s.info.LaunchEnd {
			return s
		}
		if i == 0 || e.steps[i-1].info.LaunchEnd < s.info.LaunchStart {
			return nil // windows do not overlap further back
		}
	}
	return nil
}

func (w *Window) takeAcc() *Accumulator {
	if n := len(w.accs); n > 0 {
		a := w.accs[n-1]
		w.accs = w.accs[:n-1]
		return a
	}
	return &Accumulator{}
}

// evictEngineLocked forgets the least recently stepping engine without
// steps in flight; false when every engine has some.
func (w *Window) evictEngineLocked() bool {
	var lru *engine
	for _, e := range w.engines {
		if len(e.steps) == 0 && (lru == nil || e.used < lru.used) {
			lru = e
		}
	}
	if lru == nil {
		return false
	}
	for _, s := range lru.sources {
		s.eng = nil
	}
	delete(w.engines, lru.key)
	return true
}

// Collect finalizes owner's steps that are complete, or past their
// deadline, at now, appends their results to dst and returns it. A nil
// owner collects every step.
func (w *Window) Collect(now time.Time, owner any, dst []Result) []Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := w.pending[:0]
	for _, st := range w.pending {
		switch {
		case owner != nil && st.info.Owner != owner:
			keep = append(keep, st)
		case st.evicted:
			dst = append(dst, w.finalizeLocked(st, MissingEvicted))
		case w.completeLocked(st, now):
			dst = append(dst, w.finalizeLocked(st, MissingNone))
		case !now.Before(st.info.Deadline):
			dst = append(dst, w.finalizeLocked(st, MissingIncomplete))
		default:
			keep = append(keep, st)
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	w.trimLocked()
	return dst
}

// completeLocked reports whether every launch of st's windows has arrived
// (each serving source sent a mark past their end, or closed; a worker
// that sends launch marks sent its last one for st's batch) and each has
// its records, with no record for Quiet.
func (w *Window) completeLocked(st *step, now time.Time) bool {
	for _, s := range st.eng.sources {
		if s.closed {
			continue
		}
		end, known := s.stepEnd(st)
		if !known || s.watermark < end {
			return false
		}
	}
	if st.nPlain+st.nGraph == 0 {
		return true
	}
	if st.gotPlain < st.nPlain || len(st.acc.graphs) < st.nGraph {
		return false
	}
	return now.Sub(st.last) >= w.cfg.Quiet
}

func (w *Window) finalizeLocked(st *step, reason Missing) Result {
	r := Result{Ref: st.info.Ref, Missing: reason}
	switch {
	case st.acc.Empty() && st.nPlain+st.nGraph == 0 && reason != MissingEvicted:
		r.Missing = MissingNoLaunches
	case st.acc.Empty() && reason != MissingEvicted:
		r.Missing = MissingNoKernels
	default:
		if reason == MissingNone && st.sampled {
			r.Missing = MissingSampled
		}
		r.Figures = st.acc.Figures(w.cfg.TopKernels, w.resolverLocked, &w.cats)
	}
	if r.Missing == MissingNone && st.mismatch {
		r.Missing = MissingIncomplete
	}
	st.done = true
	st.acc.Reset()
	w.accs = append(w.accs, st.acc)
	st.acc = nil
	e := st.eng
	if i := slices.Index(e.steps, st); i >= 0 {
		e.steps = slices.Delete(e.steps, i, i+1)
	}
	e.ivs = slices.DeleteFunc(e.ivs, func(iv ival) bool { return iv.st == st })
	if st.info.Batch != 0 && e.bySeq[st.info.Batch] == st {
		delete(e.bySeq, st.info.Batch)
	}
	w.trimMarksLocked(e)
	w.stats.Steps++
	return r
}

func (w *Window) resolverLocked(slot uint32) Resolver {
	if int(slot) < len(w.sources) && w.sources[slot] != nil {
		return w.sources[slot].res
	}
	return nil
}

// trimLocked bounds the runs kept per source and frees closed sources no
// step in flight needs.
func (w *Window) trimLocked() {
	oldest := w.seq + 1
	if len(w.pending) > 0 {
		oldest = w.pending[0].seq
	}
	for i, s := range w.sources {
		if s == nil {
			continue
		}
		if n := len(s.runs) - w.cfg.MaxRuns; n > 0 {
			s.runs = append(s.runs[:0], s.runs[n:]...)
			s.lastRun = 0
		}
		if s.closed && s.lastStep < oldest {
			if s.eng != nil {
				s.eng.sources = slices.DeleteFunc(s.eng.sources, func(x *source) bool { return x == s })
			}
			w.sources[i] = nil
		}
	}
}
