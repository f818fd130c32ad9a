// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow // import "github.com/inferprof/inferprof/internal/stepwindow"

import (
	"math"
	"time"
)

// SetGPUPending marks ref's step as waiting for its GPU figures: requests
// that got tokens there wait too (RequestGPU.Pending).
func (w *Window) SetGPUPending(ref Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.stepLocked(ref); st != nil {
		st.gpuPending = true
	}
}

// SetGPU gives ref's step its GPU figures.
func (w *Window) SetGPU(ref Ref, g *GPU) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.stepLocked(ref); st != nil {
		st.gpu, st.gpuPending = g, false
	}
}

// stepLocked finds ref's step, nil when it left the window.
func (w *Window) stepLocked(ref Ref) *stepRec {
	in := ref.in
	if in == nil || w.engines[in.key] != in || ref.seq >= in.nextSeq || ref.seq < in.nextSeq-uint64(in.n) {
		return nil
	}
	i := in.head + int(ref.seq-(in.nextSeq-uint64(in.n)))
	if i >= len(in.steps) {
		i -= len(in.steps)
	}
	return &in.steps[i]
}

// LookupGPU is Lookup's GPU part alone, for a request span already given
// its inter-token figures; zero when the instance or request is unknown or
// its steps left the window. finish is when the request ended (zero:
// unknown), to pick its engine as Lookup does.
func (w *Window) LookupGPU(key, requestID string, arrival, finish time.Time) RequestGPU {
	finishNs := int64(math.MaxInt64)
	if !finish.IsZero() {
		finishNs = finish.UnixNano()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	in, t, _ := w.holderLocked(key, requestID, arrival.UnixNano(), finishNs)
	if in == nil {
		return RequestGPU{}
	}
	var g RequestGPU
	base := in.nextSeq - uint64(in.n)
	for _, r := range t.recs {
		i := in.head + int(r.seq-base)
		if i >= len(in.steps) {
			i -= len(in.steps)
		}
		g.add(&in.steps[i], r.tokens)
	}
	return g
}
