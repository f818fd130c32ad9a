// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow // import "github.com/inferprof/inferprof/internal/stepwindow"

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Ref names a step added with AddRef, for SetGPU. A Ref outlives its step:
// SetGPU on a step the window evicted does nothing.
type Ref struct {
	in  *instance
	seq uint64
}

// GPU is a step's GPU figures, as the inference processor got them from
// the kernels the step launched. Times in nanoseconds.
type GPU struct {
	// Missing says why the figures are absent or partial ("" when whole);
	// with no figures at all KernelNS is 0 and Known is false.
	Missing string
	Known   bool
	// KernelNS is the step's kernel time; Categories splits it.
	KernelNS   uint64
	Categories []GPUCategory
	// IdleNS is the GPU idle time the step's CPU work caused: before its
	// first kernel and between its kernels.
	IdleNS uint64
}

// GPUCategory is the kernel time of one kernel category.
type GPUCategory struct {
	Category string
	NS       uint64
}

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

// RequestGPU is a request's share of the GPU work of the steps that gave it
// tokens: in each step, its tokens over the step's tokens.
type RequestGPU struct {
	// Steps had figures; Pending are still gathering them; Missing had
	// none or partial ones (MissingReason is the first such reason).
	Steps, Pending, Missing int
	MissingReason           string
	// TimeNS is the request's share of the steps' kernel time, and
	// Categories splits it.
	TimeNS     float64
	Categories []RequestCategory
	// CPUOverheadNS sums the steps' GPU idle time: the request waited
	// through each step whole, so it is not split.
	CPUOverheadNS uint64
}

// RequestCategory is a request's share of one kernel category.
type RequestCategory struct {
	Category string
	NS       float64
}

// Known reports whether any step of the request carried GPU information.
func (g RequestGPU) Known() bool { return g.Steps+g.Pending+g.Missing > 0 }

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

// SortCategories orders Categories by time, largest first.
func (g *RequestGPU) SortCategories() {
	slices.SortFunc(g.Categories, func(x, y RequestCategory) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(x.Category, y.Category))
	})
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
