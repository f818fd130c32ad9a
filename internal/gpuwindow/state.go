// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow

import (
	"slices"
	"sync"
	"time"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

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

type source struct {
	slot      uint32
	info      SourceInfo
	res       Resolver
	sampled   bool
	eng       *engine
	runs      []run // by correlation id
	lastRun   int   // the run the last lookup hit
	maxCorr   uint32
	watermark int64 // every launch before it has arrived
	pendL     []cuptiwire.Launch
	heldLo    uint32 // lowest and highest correlation id among pendL (and
	heldHi    uint32 // the held launches being placed again)
	pendK     []pendingKernel
	devs      [64]uint64 // device ordinal → latest kernel end seen; ordinals past 63 share the last
	lastStep  uint64     // seq of the latest step it added kernels to
	mp        *markProc  // the launch marks of its process, nil when it sends none
	closed    bool
	counts    Counts
}

// run is a range of correlation ids launched in one step (st), or outside
// every step (st nil). link outlives the step, for kernel spans.
type run struct {
	lo, hi  uint32
	st      *step
	from    int64 // the step's first launch on this source, for idle_before
	link    Link
	hasLink bool
}

type pendingKernel struct {
	Kernel
	prevEnd uint64
	at      time.Time
}

func (s *source) serves(k EngineKey) bool {
	return k.Host == s.info.Host && (k.PID == s.info.PID || k.PID == s.info.PPID) &&
		(k.Instance == "" || s.info.Instance == "" || k.Instance == s.info.Instance)
}

// marked reports whether s's launches are matched by its launch marks: its
// process sends them and e's steps carry batch numbers.
func (s *source) marked(e *engine) bool {
	return s.mp != nil && s.mp.active && e.maxSeq > 0
}

// stepEnd is when st's launches on s end, and false while a worker's marks
// may still add to them.
func (s *source) stepEnd(st *step) (int64, bool) {
	switch {
	case s.info.PID == st.eng.key.PID:
		return st.end, true
	case s.marked(st.eng) && st.info.Batch != 0:
		return s.mp.end(st.info.Batch), s.mp.done(st.info.Batch)
	default:
		return st.info.LaunchEnd, true
	}
}

func (s *source) addRun(corr uint32, st *step, from int64) {
	n := len(s.runs)
	if n > 0 && corr > s.runs[n-1].hi {
		// A run may not grow over a launch that is still held: under async
		// scheduling the next batch's launch waits for its step while this
		// batch's later launches are placed.
		last := &s.runs[n-1]
		spansHeld := s.heldHi != 0 && last.hi < s.heldHi && s.heldLo < corr
		if last.st == st && last.from == from && (st == nil || !st.done) && !spansHeld {
			last.hi = corr
			return
		}
	}
	r := run{lo: corr, hi: corr, st: st, from: from}
	if st != nil {
		r.link, r.hasLink = st.info.Link, true
	}
	if n == 0 || corr > s.runs[n-1].hi {
		s.runs = append(s.runs, r)
		return
	}
	// A launch that overtook another on the way (two threads): keep order.
	i, _ := slices.BinarySearchFunc(s.runs, corr, func(r run, c uint32) int {
		switch {
		case r.hi < c:
			return -1
		case r.lo > c:
			return 1
		}
		return 0
	})
	s.runs = slices.Insert(s.runs, i, r)
	s.lastRun = 0
}

// findRun returns the run holding corr, or nil.
func (s *source) findRun(corr uint32) *run {
	if s.lastRun < len(s.runs) {
		if r := &s.runs[s.lastRun]; r.lo <= corr && corr <= r.hi {
			return r
		}
		if s.lastRun+1 < len(s.runs) {
			if r := &s.runs[s.lastRun+1]; r.lo <= corr && corr <= r.hi {
				s.lastRun++
				return r
			}
		}
	}
	i, found := slices.BinarySearchFunc(s.runs, corr, func(r run, c uint32) int {
		switch {
		case r.hi < c:
			return -1
		case r.lo > c:
			return 1
		}
		return 0
	})
	if !found {
		return nil
	}
	s.lastRun = i
	return &s.runs[i]
}

type procKey struct {
	host string
	pid  uint32
}

// markProc is what the window keeps of one worker's marks.
type markProc struct {
	key        procKey
	ppid       uint32
	instance   string
	active     bool
	wins       []markWin // by start; one process's marks come in order
	maxEnd     int64
	maxSeq     uint64
	used       uint64 // w.seq when it last got a mark
	mismatched uint64
}

type markWin struct {
	start, end int64
	tid        uint32
	seq        uint64
	tokens     uint32
	final      bool
}

// serves reports whether a CUPTI source of this process is the marks'
// process: same parent and, when both know one, the same instance.
func (mp *markProc) serves(info SourceInfo) bool {
	return info.PPID == mp.ppid && (mp.instance == "" || info.Instance == "" || info.Instance == mp.instance)
}

// find returns the mark window that holds a launch at t on thread tid.
func (mp *markProc) find(t int64, tid uint32) *markWin {
	i, _ := slices.BinarySearchFunc(mp.wins, t, func(mw markWin, t int64) int {
		if mw.start <= t {
			return -1
		}
		return 1
	})
	// One thread's calls never overlap: the window that starts last at or
	// before t is the only candidate of its thread.
	for i--; i >= 0; i-- {
		mw := &mp.wins[i]
		if t > mw.end {
			return nil
		}
		if mw.tid == 0 || tid == 0 || mw.tid == tid {
			return mw
		}
	}
	return nil
}

// firstStart is when the worker began launching batch seq.
func (mp *markProc) firstStart(seq uint64) int64 {
	first := int64(0)
	for i := len(mp.wins) - 1; i >= 0; i-- {
		if mw := &mp.wins[i]; mw.seq == seq && (first == 0 || mw.start < first) {
			first = mw.start
		}
	}
	return first
}

// end is the end of the worker's last window of batch seq so far.
func (mp *markProc) end(seq uint64) int64 {
	end := int64(0)
	for i := len(mp.wins) - 1; i >= 0; i-- {
		if mw := &mp.wins[i]; mw.seq == seq {
			end = max(end, mw.end)
		}
	}
	return end
}

// done reports whether no more marks of batch seq will come: its final
// mark arrived, or a mark of a later batch (one process's marks come in
// order, so a lost final mark does not hold the step).
func (mp *markProc) done(seq uint64) bool {
	if mp.maxSeq > seq {
		return true
	}
	for i := len(mp.wins) - 1; i >= 0; i-- {
		if mw := &mp.wins[i]; mw.seq == seq && mw.final {
			return true
		}
	}
	return false
}
