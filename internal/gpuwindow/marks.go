// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow // import "github.com/inferprof/inferprof/internal/gpuwindow"

import (
	"slices"
	"time"
)

// Launch marks tie an executor worker's launches to the engine's steps.
//
// vLLM's multiprocess executor (tensor parallelism > 1) runs the model in
// worker processes: the engine enqueues each batch's execute_model and
// sample_tokens calls on a shared-memory queue, and each worker launches
// the batch's kernels when its main thread takes the calls off the queue.
// How far a worker lags behind the engine depends on how long its launches
// take, so no window measured in the engine process holds a worker's
// launches: when the GPU outruns the worker's CPU, the engine enqueues
// batch N+2 while the worker still launches N+1. The step hook therefore
// also runs in each worker, numbers the execute_model calls as the engine
// numbers them (both count the same calls, in the same order), and sends
// one mark per batch: the batch number, the interval from its
// execute_model call to the end of its sample_tokens call, and the thread.
// A worker's launches are matched to the mark whose interval holds them,
// and through its batch number to the engine's step.

// MarkInfo is one launch mark (see stepwire.Mark).
type MarkInfo struct {
	Host     string
	PID      uint32 // the worker process
	PPID     uint32 // its parent, the engine process
	Instance string
	// Batch is the batch number; 0 is a worker's hello, which says marks
	// will come from it.
	Batch           uint64
	Start, End      int64
	ThreadID        uint32
	Final           bool // no other mark of this batch follows
	ScheduledTokens uint32
}

// Mark hands the window a worker's launch mark, at now.
func (w *Window) Mark(m MarkInfo, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Marks++
	k := procKey{host: m.Host, pid: m.PID}
	mp := w.marks[k]
	if mp == nil || mp.ppid != m.PPID {
		if mp == nil && len(w.marks) >= w.cfg.MaxSources && !w.evictMarkProcLocked() {
			w.stats.MarksDropped++
			return
		}
		// A new process (or a reused pid under another parent) starts over.
		mp = &markProc{key: k, ppid: m.PPID, instance: m.Instance}
		w.marks[k] = mp
		for _, s := range w.sources {
			if s != nil && !s.closed && s.info.Host == m.Host && s.info.PID == m.PID && mp.serves(s.info) {
				s.mp = mp
			}
		}
	}
	mp.active = true
	mp.used = w.seq
	if m.Batch == 0 {
		return // hello
	}
	if len(mp.wins) >= w.cfg.MaxRuns {
		mp.wins = append(mp.wins[:0], mp.wins[len(mp.wins)/2:]...)
		w.stats.MarksDropped++
	}
	mw := markWin{start: m.Start, end: m.End, tid: m.ThreadID, seq: m.Batch, tokens: m.ScheduledTokens, final: m.Final}
	i := len(mp.wins)
	for i > 0 && mp.wins[i-1].start > mw.start {
		i--
	}
	mp.wins = slices.Insert(mp.wins, i, mw)
	mp.maxEnd = max(mp.maxEnd, m.End)
	mp.maxSeq = max(mp.maxSeq, m.Batch)
	// Launches that waited for this mark can be placed now.
	for _, s := range w.sources {
		if s != nil && s.mp == mp && s.eng != nil {
			w.placePendingLocked(s)
			w.retryKernelsLocked(s, now)
		}
	}
}

// trimMarksLocked forgets the marks of e's workers for batches before every
// step e still holds.
func (w *Window) trimMarksLocked(e *engine) {
	oldest := e.maxSeq + 1
	for _, st := range e.steps {
		if st.info.Batch != 0 {
			oldest = min(oldest, st.info.Batch)
		}
	}
	for _, s := range e.sources {
		mp := s.mp
		if mp == nil || len(mp.wins) == 0 || len(s.pendL) > 0 {
			continue
		}
		mp.wins = slices.DeleteFunc(mp.wins, func(mw markWin) bool { return mw.seq < oldest })
	}
}

// evictMarkProcLocked forgets the worker heard from least recently whose
// CUPTI stream is gone or never came; false when every one has one open.
func (w *Window) evictMarkProcLocked() bool {
	open := map[*markProc]bool{}
	for _, s := range w.sources {
		if s != nil && !s.closed && s.mp != nil {
			open[s.mp] = true
		}
	}
	var lru *markProc
	for _, mp := range w.marks {
		if !open[mp] && (lru == nil || mp.used < lru.used) {
			lru = mp
		}
	}
	if lru == nil {
		return false
	}
	delete(w.marks, lru.key)
	for _, s := range w.sources {
		if s != nil && s.mp == lru {
			s.mp = nil
		}
	}
	return true
}
