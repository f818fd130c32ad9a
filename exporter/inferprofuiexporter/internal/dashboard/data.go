// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"
)

// slowest is how many requests the table lists.
const slowest = 10

// Build assembles the document from the history and, when set, the
// timeline store.
func (h *History) Build(version string, start, now time.Time, tl *timeline.Store, budget int64) Doc {
	h.mu.Lock()
	d := Doc{
		Version: version, NowMs: now.UnixMilli(), StartMs: start.UnixMilli(), Targets: h.targets,
		Latency: map[string][]LatencyPoint{}, Phases: []PhasePoint{}, Goodput: []GoodputPoint{},
		GPUs: []GPU{}, Slowest: []SlowRequest{},
	}
	for key, r := range h.latency {
		d.Latency[key] = latencyPoints(r)
	}
	h.buildEngines(&d)
	d.Errors = append([]ErrorRow{}, h.errors...)
	byT := map[int64]*PhasePoint{}
	for key, r := range h.phases {
		for _, p := range r.pts {
			pp, ok := byT[p.t]
			if !ok {
				pp = &PhasePoint{T: p.t}
				byT[p.t] = pp
			}
			if p.v.count == 0 {
				continue
			}
			mean := fptr(p.v.sum / float64(p.v.count))
			switch key {
			case "queue":
				pp.Queue = mean
			case "prefill":
				pp.Prefill = mean
			case "decode":
				pp.Decode = mean
			case "other":
				pp.Other = mean
			}
		}
	}
	for _, pp := range byT {
		d.Phases = append(d.Phases, *pp)
	}
	slices.SortFunc(d.Phases, func(a, b PhasePoint) int { return cmp.Compare(a.T, b.T) })
	for _, p := range h.reqs.pts {
		d.Goodput = append(d.Goodput, GoodputPoint{T: p.t, Requests: p.v.requests, Good: p.v.good, Errors: p.v.errors})
	}
	d.Totals = Totals{Requests: h.totals.requests, Good: h.totals.good, Errors: h.totals.errors}
	if h.totals.requests > 0 {
		d.Totals.GoodputRatio = fptr(float64(h.totals.good) / float64(h.totals.requests))
	}

	cats := map[string]float64{}
	d.Kernels.Top = []KernelRow{}
	for k, v := range h.kernels {
		d.Kernels.Top = append(d.Kernels.Top, KernelRow{Name: k.name, Category: k.category, Seconds: v.seconds, Count: v.count})
		cats[k.category] += v.seconds
		d.Kernels.TotalSeconds += v.seconds
	}
	slices.SortFunc(d.Kernels.Top, func(a, b KernelRow) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Name, b.Name))
	})
	if len(d.Kernels.Top) > 15 {
		d.Kernels.Top = d.Kernels.Top[:15]
	}
	d.Kernels.Categories = []CategoryRow{}
	for c, s := range cats {
		row := CategoryRow{Category: c, Seconds: s}
		if d.Kernels.TotalSeconds > 0 {
			row.Share = s / d.Kernels.TotalSeconds
		}
		d.Kernels.Categories = append(d.Kernels.Categories, row)
	}
	slices.SortFunc(d.Kernels.Categories, func(a, b CategoryRow) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Category, b.Category))
	})

	for _, g := range h.gpus {
		out := GPU{Host: g.host, ID: g.id, Name: g.name,
			Utilization: series(g.util, 100), MemoryGiB: series(g.mem, 1.0/(1<<30)), PowerW: series(g.pow, 1)}
		if g.limit > 0 {
			out.MemoryLimit = fptr(g.limit / (1 << 30))
		}
		d.GPUs = append(d.GPUs, out)
	}
	slices.SortFunc(d.GPUs, func(a, b GPU) int { return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.ID, b.ID)) })
	h.mu.Unlock()

	if tl != nil {
		st := tl.Stats()
		d.Timeline = TimelineInfo{Enabled: true, UsedBytes: tl.Used(), BudgetBytes: budget,
			EvictedRecords: st.Evicted, SkippedBadSpans: st.Bad}
		reqs := tl.Requests()
		d.Timeline.Requests = len(reqs)
		d.Slowest = slowestOf(reqs)
	}
	return d
}

// slowestOf picks the requests with the longest end-to-end time (the
// span's own duration when the engine gave none).
func slowestOf(reqs []timeline.Request) []SlowRequest {
	e2e := func(r timeline.Request) float64 {
		if !math.IsNaN(r.E2E) {
			return r.E2E
		}
		return float64(r.End-r.Start) / 1e9
	}
	slices.SortFunc(reqs, func(a, b timeline.Request) int {
		return cmp.Or(cmp.Compare(e2e(b), e2e(a)), cmp.Compare(a.RequestID, b.RequestID))
	})
	out := make([]SlowRequest, 0, slowest)
	for _, r := range reqs[:min(slowest, len(reqs))] {
		// The window around the request, with a margin to see what ran
		// before and after it.
		margin := max((r.End-r.Start)/10, int64(20*time.Millisecond))
		sr := SlowRequest{
			RequestID: r.RequestID, TraceID: r.TraceID.String(), Instance: r.Instance, Model: r.Model,
			StartMs: r.Start / 1e6, E2E: e2e(r), TTFT: fptr(r.TTFT), TPOT: fptr(r.TPOT),
			Queue: fptr(r.Queue), Prefill: fptr(r.Prefill), Decode: fptr(r.Decode), Other: fptr(r.Other),
			Error:    r.ErrorType,
			Timeline: "/timeline?from=" + strconv.FormatInt(r.Start-margin, 10) + "&to=" + strconv.FormatInt(r.End+margin, 10),
		}
		if r.OutputToks >= 0 {
			n := r.OutputToks
			sr.OutputTokens = &n
		}
		out = append(out, sr)
	}
	return out
}
