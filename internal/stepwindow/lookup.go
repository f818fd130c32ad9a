// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"math"
	"slices"
	"time"
)

// Lookup rebuilds request requestID's token timestamps from the steps of the
// service instance key (InstanceKey of the request span's resource).
// arrival is when the request arrived (the request span's start); finish,
// when it ended (zero: unknown). Lookup does not consume the steps.
//
// The request was served by one engine of the instance: the one whose
// window holds its id. Request ids are unique per server; should two
// engines hold one (ids a client chose, or replicas without instance ids),
// the one with more of the id's tokens within the request's life wins. A key
// with an instance id whose engines sent none (an older hook) falls back to
// its service.name.
func (w *Window) Lookup(key, requestID string, arrival, finish time.Time) Result {
	arrivalNs := arrival.UnixNano()
	finishNs := int64(math.MaxInt64)
	if !finish.IsZero() {
		finishNs = finish.UnixNano()
	}
	w.mu.Lock()
	in, t, status := w.holderLocked(key, requestID, arrivalNs, finishNs)
	if in == nil {
		w.mu.Unlock()
		return Result{Status: status}
	}
	base := in.nextSeq - uint64(in.n)
	ends := make([]int64, 0, len(t.recs))
	res := Result{Status: StatusOK}
	for _, r := range t.recs {
		i := in.head + int(r.seq-base)
		if i >= len(in.steps) {
			i -= len(in.steps)
		}
		ends = append(ends, in.steps[i].end)
		res.Tokens += int(r.tokens)
		res.GPU.add(&in.steps[i], r.tokens)
	}
	// Lost or truncated steps anywhere in the request's life taint it.
	for _, f := range in.flaws {
		if f.end >= arrivalNs && f.start <= finishNs {
			res.Status = StatusIncomplete
			break
		}
	}
	w.mu.Unlock()

	res.TokenSteps = len(ends)
	if len(ends) > 1 {
		res.Gaps = make([]float64, len(ends)-1)
		for i := 1; i < len(ends); i++ {
			res.Gaps[i-1] = float64(ends[i]-ends[i-1]) / 1e9
		}
	}
	res.DecodeSteps = len(res.Gaps)
	if len(res.Gaps) > 0 {
		sorted := slices.Clone(res.Gaps)
		slices.Sort(sorted)
		res.P50 = nearestRank(sorted, 0.50)
		res.P99 = nearestRank(sorted, 0.99)
		res.Max = sorted[len(sorted)-1]
		limit := w.cfg.StallFactor * res.P50
		for _, g := range res.Gaps {
			if g > limit {
				res.Stalls++
			}
		}
	}
	return res
}

// nearestRank returns the q-quantile of sorted by the nearest-rank method.
func nearestRank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// holderLocked finds the engine window of instance key holding request
// requestID and its track; when none does (or its steps left the window),
// in is nil and status says why.
func (w *Window) holderLocked(key, requestID string, arrivalNs, finishNs int64) (in *instance, t *track, status Status) {
	id, service := splitKey(key)
	g := w.groups[groupOf(id, service)]
	if g == nil && id != "" {
		g = w.groups[groupOf("", service)]
	}
	if g == nil {
		return nil, nil, StatusUnknownInstance
	}
	in, t = holder(g.engines, requestID, arrivalNs, finishNs)
	if in == nil {
		// No engine holds the request: it may have been in what some
		// engine evicted since it arrived.
		status = StatusNoSteps
		for _, e := range g.engines {
			if e.evictedEnd >= arrivalNs {
				status = StatusEvicted
			}
		}
		return nil, nil, status
	}
	if in.evictedEnd >= arrivalNs {
		return nil, nil, StatusEvicted
	}
	return in, t, StatusOK
}

// holder returns the engine window holding request id, and its track.
func holder(engines []*instance, id string, arrival, finish int64) (*instance, *track) {
	var best *instance
	var bestT *track
	bestN := -1
	for _, in := range engines {
		t := in.requests[id]
		if t == nil || len(t.recs) == 0 {
			continue
		}
		if best == nil {
			best, bestT = in, t
			continue
		}
		if bestN < 0 {
			bestN = best.tokensWithin(bestT, arrival, finish)
		}
		if n := in.tokensWithin(t, arrival, finish); n > bestN {
			best, bestT, bestN = in, t, n
		}
	}
	return best, bestT
}

// tokensWithin counts t's token steps that ended within [arrival, finish].
func (in *instance) tokensWithin(t *track, arrival, finish int64) int {
	base := in.nextSeq - uint64(in.n)
	n := 0
	for _, r := range t.recs {
		i := in.head + int(r.seq-base)
		if i >= len(in.steps) {
			i -= len(in.steps)
		}
		if e := in.steps[i].end; e >= arrival && e <= finish {
			n++
		}
	}
	return n
}

func (g *RequestGPU) add(st *stepRec, tokens int64) {
	switch {
	case st.gpuPending:
		g.Pending++
		return
	case st.gpu == nil:
		return
	}
	if st.gpu.Missing != "" {
		g.Missing++
		if g.MissingReason == "" {
			g.MissingReason = st.gpu.Missing
		}
	}
	if !st.gpu.Known {
		return
	}
	if st.gpu.Missing == "" {
		g.Steps++
	}
	g.CPUOverheadNS += st.gpu.IdleNS
	if st.tokens <= 0 || st.gpu.KernelNS == 0 {
		return
	}
	share := float64(tokens) / float64(st.tokens)
	g.TimeNS += share * float64(st.gpu.KernelNS)
	for _, c := range st.gpu.Categories {
		i := slices.IndexFunc(g.Categories, func(rc RequestCategory) bool { return rc.Category == c.Category })
		if i < 0 {
			g.Categories = append(g.Categories, RequestCategory{Category: c.Category})
			i = len(g.Categories) - 1
		}
		g.Categories[i].NS += share * float64(c.NS)
	}
}
