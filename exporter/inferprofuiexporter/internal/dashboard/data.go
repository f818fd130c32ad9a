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

// Targets are the goodput targets the dashboard draws, in seconds; 0 means
// none. They are the inference_metrics connector's, as it emits them.
type Targets struct {
	TTFT float64 `json:"ttft"`
	TPOT float64 `json:"tpot"`
	E2E  float64 `json:"e2e"`
}

// Doc is GET /dashboard.json. Times are unix milliseconds, durations
// seconds; null means not measured.
type Doc struct {
	Version  string                    `json:"version"`
	NowMs    int64                     `json:"now_ms"`
	StartMs  int64                     `json:"start_ms"`
	Targets  Targets                   `json:"targets"`
	Latency  map[string][]LatencyPoint `json:"latency"`
	Phases   []PhasePoint              `json:"phases"`
	Goodput  []GoodputPoint            `json:"goodput"`
	Totals   Totals                    `json:"totals"`
	Kernels  Kernels                   `json:"kernels"`
	GPUs     []GPU                     `json:"gpus"`
	Slowest  []SlowRequest             `json:"slowest"`
	Timeline TimelineInfo              `json:"timeline"`
	// LatencySource says where each latency chart's points come from:
	// request spans, or the engine's own histogram when no request span
	// arrived (tracing off). EngineLatency is the engine's own always, a
	// cross-check of the spans' figures.
	LatencySource map[string]string         `json:"latency_source"`
	EngineLatency map[string][]LatencyPoint `json:"engine_latency"`
	Engines       []EngineSeries            `json:"engines"`
	Errors        []ErrorRow                `json:"errors"`
}

// LatencyPoint is one flush's percentiles, read as /signals reads them:
// from the exponential twin where the connector sends one, within
// RelativeError of exact, else estimated inside the histogram buckets
// (bucketquantile.Quantile).
type LatencyPoint struct {
	T             int64    `json:"t"`
	Count         int64    `json:"count"`
	P50           *float64 `json:"p50"`
	P90           *float64 `json:"p90"`
	P99           *float64 `json:"p99"`
	Method        string   `json:"quantile_method"`
	RelativeError *float64 `json:"relative_error"`
}

// PhasePoint is one flush's mean time per request in each phase.
type PhasePoint struct {
	T       int64    `json:"t"`
	Queue   *float64 `json:"queue"`
	Prefill *float64 `json:"prefill"`
	Decode  *float64 `json:"decode"`
	Other   *float64 `json:"other"`
}

// GoodputPoint is one flush's request counts.
type GoodputPoint struct {
	T        int64 `json:"t"`
	Requests int64 `json:"requests"` // successful
	Good     int64 `json:"good"`
	Errors   int64 `json:"errors"`
}

// Totals are the counts since the collector started.
type Totals struct {
	Requests     int64    `json:"requests"` // successful
	Good         int64    `json:"good"`
	Errors       int64    `json:"errors"`
	GoodputRatio *float64 `json:"goodput_ratio"`
}

// Kernels is GPU kernel time since the collector started.
type Kernels struct {
	TotalSeconds float64       `json:"total_seconds"`
	Top          []KernelRow   `json:"top"`
	Categories   []CategoryRow `json:"categories"`
}

// KernelRow is one kernel's totals.
type KernelRow struct {
	Name     string  `json:"name"`
	Category string  `json:"category"`
	Seconds  float64 `json:"seconds"`
	Count    int64   `json:"count"`
}

// CategoryRow is one category's GPU time.
type CategoryRow struct {
	Category string  `json:"category"`
	Seconds  float64 `json:"seconds"`
	Share    float64 `json:"share"`
}

// GPU is one device's readings over time: [unix ms, value] pairs.
type GPU struct {
	Host        string       `json:"host"`
	ID          string       `json:"id"`
	Name        string       `json:"name"`
	Utilization [][2]float64 `json:"utilization"` // percent
	MemoryGiB   [][2]float64 `json:"memory_gib"`
	MemoryLimit *float64     `json:"memory_limit_gib"`
	PowerW      [][2]float64 `json:"power_w"`
}

// SlowRequest is one of the slowest requests the timeline holds.
type SlowRequest struct {
	RequestID    string   `json:"request_id"`
	TraceID      string   `json:"trace_id"`
	Instance     string   `json:"instance"`
	Model        string   `json:"model"`
	StartMs      int64    `json:"start_ms"`
	E2E          float64  `json:"e2e"`
	TTFT         *float64 `json:"ttft"`
	TPOT         *float64 `json:"tpot"`
	Queue        *float64 `json:"queue"`
	Prefill      *float64 `json:"prefill"`
	Decode       *float64 `json:"decode"`
	Other        *float64 `json:"other"`
	OutputTokens *int64   `json:"output_tokens"`
	Error        string   `json:"error"`
	Timeline     string   `json:"timeline"` // /timeline URL of its window
}

// TimelineInfo says how full the timeline store is.
type TimelineInfo struct {
	Enabled         bool  `json:"enabled"`
	Requests        int   `json:"requests"`
	UsedBytes       int64 `json:"used_bytes"`
	BudgetBytes     int64 `json:"budget_bytes"`
	EvictedRecords  int64 `json:"evicted_records"`
	SkippedBadSpans int64 `json:"skipped_bad_spans"`
}

// slowest is how many requests the table lists.
const slowest = 10

func fptr(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return &v
}

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

func series(r ring[float64], scale float64) [][2]float64 {
	out := make([][2]float64, 0, len(r.pts))
	for _, p := range r.pts {
		out = append(out, [2]float64{float64(p.t), p.v * scale})
	}
	return out
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

// finite reports whether v is a number a chart can draw (not NaN or ±Inf).
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
