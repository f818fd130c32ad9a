// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow

import (
	"slices"
	"time"
)

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
