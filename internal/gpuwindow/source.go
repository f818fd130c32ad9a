// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow // import "github.com/inferprof/inferprof/internal/gpuwindow"

import (
	"slices"
	"time"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// Source is one CUPTI stream's door into the window: one per connection.
type Source struct {
	w *Window
	s *source
}

// Counts returns the source's counts.
func (src *Source) Counts() Counts {
	if src == nil {
		return Counts{}
	}
	src.w.mu.Lock()
	defer src.w.mu.Unlock()
	return src.s.counts
}

// OpenSource registers a CUPTI stream. res names its kernel series. It
// returns nil when MaxSources streams are open.
func (w *Window) OpenSource(info SourceInfo, res Resolver) *Source {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &source{info: info, res: res, sampled: info.Sampled}
	slot := slices.Index(w.sources, nil)
	switch {
	case slot >= 0:
		w.sources[slot] = s
	case len(w.sources) < w.cfg.MaxSources:
		slot = len(w.sources)
		w.sources = append(w.sources, s)
	default:
		w.stats.SourcesRefused++
		return nil
	}
	s.slot = uint32(slot)
	if mp := w.marks[procKey{host: info.Host, pid: info.PID}]; mp != nil && mp.serves(info) {
		s.mp = mp
	}
	w.attachAnyLocked(s)
	return &Source{w: w, s: s}
}

// Close says the stream ended; what it sent still counts.
func (src *Source) Close() {
	if src == nil {
		return
	}
	w := src.w
	w.mu.Lock()
	defer w.mu.Unlock()
	src.s.closed = true
	src.s.pendL, src.s.pendK = nil, nil
}

// attachAnyLocked attaches s to the engine it serves, preferring the one
// that runs in its own process.
func (w *Window) attachAnyLocked(s *source) {
	var best *engine
	for k, e := range w.engines {
		if s.serves(k) && (best == nil || k.PID == s.info.PID) {
			best = e
		}
	}
	if best != nil {
		w.attachLocked(s, best)
	}
}

func (w *Window) attachLocked(s *source, e *engine) {
	s.eng = e
	e.sources = append(e.sources, s)
	w.placePendingLocked(s)
}

// Launches hands the window a batch of launches (and marks), at now.
func (src *Source) Launches(ls []cuptiwire.Launch, now time.Time) {
	if src == nil {
		return
	}
	w, s := src.w, src.s
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range ls {
		l := &ls[i]
		if l.Kind == cuptiwire.LaunchKindMark {
			s.watermark = max(s.watermark, int64(l.Time))
			continue
		}
		s.maxCorr = max(s.maxCorr, l.Correlation)
		if s.eng == nil {
			w.holdLaunchLocked(s, *l)
			continue
		}
		w.placeLocked(s, *l)
	}
	w.retryKernelsLocked(s, now)
}

func (w *Window) holdLaunchLocked(s *source, l cuptiwire.Launch) {
	if len(s.pendL) >= w.cfg.MaxPendingLaunches {
		s.pendL = s.pendL[1:]
		w.stats.LaunchesDropped++
		s.counts.LaunchesDropped++
	}
	if s.heldHi == 0 {
		s.heldLo, s.heldHi = l.Correlation, l.Correlation
	} else {
		s.heldLo, s.heldHi = min(s.heldLo, l.Correlation), max(s.heldHi, l.Correlation)
	}
	s.pendL = append(s.pendL, l)
}

// placeLocked gives launch l to the step whose launch window holds it,
// holds it when that step (or, for a worker that sends launch marks, its
// mark) may still come, and otherwise marks it outside. The engine's own
// process is matched by the steps' launch windows; a worker by its marks,
// which name the batch; a worker without marks by the steps' time ranges.
func (w *Window) placeLocked(s *source, l cuptiwire.Launch) {
	e := s.eng
	t := int64(l.Time)
	var st *step
	from := int64(0)
	switch {
	case s.info.PID == e.key.PID:
		if st = e.findOwn(t, l.ThreadID); st == nil && e.mayCome(t, l.ThreadID) {
			w.holdLaunchLocked(s, l)
			return
		}
		if st != nil {
			from = st.start
		}
	case s.marked(e):
		mw := s.mp.find(t, l.ThreadID)
		switch {
		case mw == nil && t > s.mp.maxEnd:
			w.holdLaunchLocked(s, l) // its mark may still come
			return
		case mw != nil:
			if st = e.bySeq[mw.seq]; st == nil && mw.seq > e.maxSeq {
				w.holdLaunchLocked(s, l) // its step may still come
				return
			}
			if st != nil {
				from = s.mp.firstStart(mw.seq)
				if mw.tokens != st.info.ScheduledTokens && !st.mismatch {
					st.mismatch = true
					w.stats.MarksMismatched++
					s.mp.mismatched++
				}
			}
		}
	default:
		if st = e.find(t); st == nil && t > e.maxRE {
			w.holdLaunchLocked(s, l)
			return
		}
		if st != nil {
			from = st.info.LaunchStart
		}
	}
	if st == nil {
		w.stats.LaunchesOutside++
	} else if l.Kind == cuptiwire.LaunchKindGraph {
		st.nGraph++
	} else {
		st.nPlain++
	}
	s.addRun(l.Correlation, st, from)
}

// placePendingLocked places the held launches that a newly known step may
// hold, then the kernels waiting on them.
func (w *Window) placePendingLocked(s *source) {
	if s.eng == nil || len(s.pendL) == 0 {
		return
	}
	held := s.pendL
	s.pendL = nil
	// heldLo and heldHi still cover held while it is placed again.
	for _, l := range held {
		w.placeLocked(s, l)
	}
	s.heldLo, s.heldHi = 0, 0
	for _, l := range s.pendL {
		if s.heldHi == 0 {
			s.heldLo, s.heldHi = l.Correlation, l.Correlation
		}
		s.heldLo, s.heldHi = min(s.heldLo, l.Correlation), max(s.heldHi, l.Correlation)
	}
	w.retryKernelsLocked(s, time.Time{})
}

// Kernels hands the window a batch of kernel records (kernels and, in graph
// mode, whole graph launches) at now.
func (src *Source) Kernels(ks []Kernel, now time.Time) {
	if src == nil {
		return
	}
	w, s := src.w, src.s
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range ks {
		k := &ks[i]
		d := &s.devs[min(k.Device, 63)]
		prev := *d
		if k.End > prev {
			*d = k.End
		}
		if !w.kernelLocked(s, k, prev, now) {
			if len(s.pendK) >= w.cfg.MaxPendingKernels {
				s.pendK = s.pendK[1:]
				w.stats.KernelsDropped++
				s.counts.KernelsDropped++
			}
			s.pendK = append(s.pendK, pendingKernel{Kernel: *k, prevEnd: prev, at: now})
		}
	}
}

// kernelLocked sums k into its step; false when its launch (or the launch's
// step) has not arrived yet and k must wait.
func (w *Window) kernelLocked(s *source, k *Kernel, prevEnd uint64, now time.Time) bool {
	r := s.findRun(k.Correlation)
	switch {
	case r == nil:
		if k.Correlation > s.maxCorr || len(s.pendL) > 0 && k.Correlation >= s.pendL[0].Correlation {
			return false
		}
		w.stats.KernelsUnmatched++
		s.counts.KernelsUnmatched++
	case r.st != nil && !r.st.done:
		st := r.st
		st.acc.Add(s.slot, k, prevEnd, uint64(max(r.from, 0)))
		if !k.Graph {
			st.gotPlain++
		}
		if !now.IsZero() {
			st.last = now
		}
		s.lastStep = max(s.lastStep, st.seq)
		w.stats.Kernels++
	case r.hasLink:
		w.stats.KernelsLate++
		s.counts.KernelsLate++
	default:
		w.stats.KernelsOutside++
		s.counts.KernelsOutside++
	}
	return true
}

func (w *Window) retryKernelsLocked(s *source, now time.Time) {
	if len(s.pendK) == 0 {
		return
	}
	keep := s.pendK[:0]
	for _, pk := range s.pendK {
		at := now
		if at.IsZero() {
			at = pk.at
		}
		if !w.kernelLocked(s, &pk.Kernel, pk.prevEnd, at) {
			keep = append(keep, pk)
		}
	}
	clear(s.pendK[len(keep):])
	s.pendK = keep
}

// LinkOf returns the step that launched correlation id corr on this
// source, while the source remembers it (Config.MaxRuns).
func (src *Source) LinkOf(corr uint32) (Link, bool) {
	if src == nil {
		return Link{}, false
	}
	src.w.mu.Lock()
	defer src.w.mu.Unlock()
	if r := src.s.findRun(corr); r != nil && r.hasLink {
		return r.link, true
	}
	return Link{}, false
}
