// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"math"
	"slices"
)

// Add appends step s to its engine's window in service instance key (see
// InstanceKey and FromSpan) and evicts what the bounds require. Steps of one
// source must arrive in order; late ones are dropped.
func (w *Window) Add(key string, s *Step) {
	w.AddRef(key, s)
}

// AddRef is Add returning a reference to the step, for SetGPU; ok is false
// when the step was dropped.
func (w *Window) AddRef(key string, s *Step) (ref Ref, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, service := splitKey(key)
	ek := engineKey{group: groupOf(id, service), engine: s.Engine}
	in := w.engines[ek]
	if in == nil {
		if len(w.engines) >= w.cfg.MaxInstances {
			w.evictInstanceLocked()
		}
		in = &instance{
			key:        ek,
			steps:      make([]stepRec, 0, 64),
			requests:   map[string]*track{},
			sources:    map[uint64]source{},
			firstStart: s.StartUnixNs,
		}
		w.engines[ek] = in
		g := w.groups[ek.group]
		if g == nil {
			g = &group{}
			w.groups[ek.group] = g
		}
		g.engines = append(g.engines, in)
	}
	w.tick++
	in.used = w.tick
	flawed := s.Truncated
	flawStart := s.StartUnixNs
	if last, found := in.sources[s.Source]; found {
		if s.Index <= last.index {
			return Ref{}, false
		}
		if s.Index != last.index+1 {
			// The lost steps ran between the previous step and this one.
			flawed = true
			flawStart = last.end
		}
	} else {
		if s.Index > 1 {
			// The source ran before the window saw the instance (the
			// collector started late, or the instance was evicted): its
			// earlier steps are as good as evicted for requests that
			// arrived before then. A source the window forgot since (see
			// addSourceLocked) stepped only before the window's oldest
			// step, so the window still covers what came after.
			in.evictedEnd = max(in.evictedEnd, in.firstStart)
		}
		w.addSourceLocked(in)
	}
	in.sources[s.Source] = source{index: s.Index, end: s.EndUnixNs}

	if in.n == w.cfg.MaxSteps {
		w.evictOldestLocked(in)
	}
	slot := w.slotLocked(in)
	touched := slot.touched[:0] // reuse the evicted step's slice when the ring wraps
	seq := in.nextSeq
	var total int64
	for i, id := range s.RequestIDs {
		tok := int64(1)
		if i < len(s.RequestTokens) {
			tok = s.RequestTokens[i]
		}
		if tok <= 0 {
			continue
		}
		t := in.requests[id]
		if t == nil {
			t = &track{id: id}
			in.requests[id] = t
		}
		t.recs = append(t.recs, tokenRec{seq: seq, tokens: tok})
		touched = append(touched, t)
		total += tok
	}
	*slot = stepRec{start: s.StartUnixNs, end: s.EndUnixNs, touched: touched, tokens: total}
	in.nextSeq++
	if flawed {
		if len(in.flaws) >= w.cfg.MaxSteps {
			in.flaws = in.flaws[1:]
		}
		in.flaws = append(in.flaws, flaw{flawStart, s.EndUnixNs})
	}
	w.records += len(touched)

	for in.n > 0 && in.steps[in.head].end < s.EndUnixNs-int64(w.cfg.MaxAge) {
		w.evictOldestLocked(in)
	}
	for w.records > w.cfg.MaxRecords {
		w.evictGlobalOldestLocked()
	}
	return Ref{in: in, seq: seq}, true
}

// addSourceLocked makes room for a new source: it forgets sources whose
// last step has left the window (their processes are most likely gone) and,
// if the instance still holds MaxSources, the one heard least recently. It
// scans the sources, but only when a new one appears.
func (w *Window) addSourceLocked(in *instance) {
	if len(in.sources) == 0 {
		return
	}
	for k, src := range in.sources {
		if src.end <= in.evictedEnd {
			delete(in.sources, k)
		}
	}
	for len(in.sources) >= w.cfg.MaxSources {
		var oldest uint64
		end := int64(math.MaxInt64)
		for k, src := range in.sources {
			if src.end < end {
				oldest, end = k, src.end
			}
		}
		delete(in.sources, oldest)
		w.evictedSources++
	}
}

// slotLocked returns the ring slot for a new step and counts it.
func (w *Window) slotLocked(in *instance) *stepRec {
	if in.n == len(in.steps) {
		if len(in.steps) < w.cfg.MaxSteps {
			// Grow: unroll the ring so head is 0, then append.
			if in.head != 0 {
				in.steps = slices.Concat(in.steps[in.head:], in.steps[:in.head])
				in.head = 0
			}
			in.steps = append(in.steps, stepRec{})
			in.n++
			return &in.steps[len(in.steps)-1]
		}
	}
	i := (in.head + in.n) % len(in.steps)
	in.n++
	return &in.steps[i]
}

// evictOldestLocked drops the instance's oldest step and its token records.
func (w *Window) evictOldestLocked(in *instance) {
	st := &in.steps[in.head]
	seq := in.nextSeq - uint64(in.n)
	for _, t := range st.touched {
		// The oldest record of every touched track is this step's.
		if len(t.recs) > 0 && t.recs[0].seq == seq {
			t.recs = t.recs[1:]
			w.records--
		}
		if len(t.recs) == 0 {
			delete(in.requests, t.id)
		}
	}
	clear(st.touched)
	in.evictedEnd = max(in.evictedEnd, st.end)
	for len(in.flaws) > 0 && in.flaws[0].end <= in.evictedEnd {
		in.flaws = in.flaws[1:]
	}
	in.head = (in.head + 1) % len(in.steps)
	in.n--
	w.evictedSteps++
}

func (w *Window) evictGlobalOldestLocked() {
	var oldest *instance
	for _, in := range w.engines {
		if in.n > 0 && (oldest == nil || in.steps[in.head].end < oldest.steps[oldest.head].end) {
			oldest = in
		}
	}
	if oldest == nil {
		w.records = 0
		return
	}
	w.evictOldestLocked(oldest)
}

func (w *Window) evictInstanceLocked() {
	var lru *instance
	for _, in := range w.engines {
		if lru == nil || in.used < lru.used {
			lru = in
		}
	}
	if lru == nil {
		return
	}
	for _, t := range lru.requests {
		w.records -= len(t.recs)
	}
	w.evictedSteps += uint64(lru.n)
	delete(w.engines, lru.key)
	g := w.groups[lru.key.group]
	g.engines = slices.DeleteFunc(g.engines, func(in *instance) bool { return in == lru })
	if len(g.engines) == 0 {
		delete(w.groups, lru.key.group)
	}
	w.evictedInstances++
}

// Stats returns the window's sizes and eviction counters.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{
		Instances:        len(w.groups),
		Engines:          len(w.engines),
		Records:          w.records,
		EvictedSteps:     w.evictedSteps,
		EvictedInstances: w.evictedInstances,
		EvictedSources:   w.evictedSources,
	}
	for _, in := range w.engines {
		s.Steps += in.n
		s.Sources += len(in.sources)
	}
	return s
}
