// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

// History and what it is made of, with the small helpers that the readers
// (history.go, engine.go, exponential.go, errors.go) and Build (data.go) all
// call: below every one of them, so that each reference runs down.

import (
	"math"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/exphist"
	"github.com/inferprof/inferprof/internal/names"
)

// maxPoints is how many flushes of history each chart keeps: an hour at the
// connector's default 15 s flush interval.
const maxPoints = 240

// Latency histograms charted as percentiles over time.
var latencyMetrics = map[string]string{
	names.MetricTimeToFirstToken:   "ttft",
	names.MetricTimePerOutputToken: "tpot",
	names.MetricInterTokenLatency:  "itl",
	names.MetricRequestDuration:    "e2e",
}

// Phase histograms charted as mean seconds per request.
var phaseMetrics = map[string]string{
	names.MetricQueueDuration:   "queue",
	names.MetricPrefillDuration: "prefill",
	names.MetricDecodeDuration:  "decode",
	names.MetricOtherDuration:   "other",
}

// hist is one flush of a histogram, all series merged, in Graphsignal's
// form (upper bound -> count; the overflow folded into the last bound), so
// bucketquantile.Quantile reads it as it reads /signals.
type hist struct {
	bins     map[float64]int64
	count    int64
	sum      float64
	min, max *float64
	exp      *exphist.Histogram // the exponential twin's values, when the connector sends them
}

func (h *hist) add(dp pmetric.HistogramDataPoint) {
	bounds, counts := dp.ExplicitBounds(), dp.BucketCounts()
	for i := 0; i < counts.Len(); i++ {
		c := int64(counts.At(i))
		if c == 0 {
			continue
		}
		switch {
		case i < bounds.Len():
			h.bins[bounds.At(i)] += c
		case bounds.Len() > 0:
			h.bins[bounds.At(bounds.Len()-1)] += c
		}
	}
	h.count += int64(dp.Count())
	h.sum += dp.Sum()
	if dp.HasMin() {
		v := dp.Min()
		if h.min == nil || v < *h.min {
			h.min = &v
		}
	}
	if dp.HasMax() {
		v := dp.Max()
		if h.max == nil || v > *h.max {
			h.max = &v
		}
	}
}

// counts is one flush of the request counters.
type counts struct {
	requests, errors, good int64
}

type timed[T any] struct {
	t int64 // unix ms, the flush's timestamp
	v T
}

// ring keeps the last maxPoints flushes, merging points of one timestamp.
type ring[T any] struct{ pts []timed[T] }

func (r *ring[T]) at(t int64, mk func() T) *T {
	for i := len(r.pts) - 1; i >= 0 && i >= len(r.pts)-8; i-- {
		if r.pts[i].t == t {
			return &r.pts[i].v
		}
	}
	r.pts = append(r.pts, timed[T]{t: t, v: mk()})
	slices.SortStableFunc(r.pts, func(a, b timed[T]) int { return int(a.t - b.t) })
	if len(r.pts) > maxPoints {
		r.pts = slices.Delete(r.pts, 0, len(r.pts)-maxPoints)
	}
	for i := range r.pts {
		if r.pts[i].t == t {
			return &r.pts[i].v
		}
	}
	return &r.pts[len(r.pts)-1].v
}

type kernelKey struct{ name, category string }

type kernelTotals struct {
	seconds float64
	count   int64
}

type gpu struct {
	host, id, name string
	util, mem, pow ring[float64]
	limit          float64
}

// History accumulates the deltas of what the exporter's metrics pipelines
// gave it (the same data the /signals store gets), under the source names,
// so kernel categories survive Graphsignal's renaming. Safe for concurrent
// use.
type History struct {
	mu      sync.Mutex
	latency map[string]*ring[*hist]
	phases  map[string]*ring[*hist]
	reqs    ring[counts]
	totals  counts
	kernels map[kernelKey]*kernelTotals
	gpus    map[string]*gpu
	// targets are the latest the inference_metrics connector emitted
	// (inferprof.server.goodput.target); hasTargets once it did.
	targets    Targets
	hasTargets bool
	// The engines' own gauges and latency histograms (engine.go), and the
	// last error records (errors.go).
	engines       map[engineKey]*engineSeries
	engineLatency map[string]*ring[*hist]
	errors        []ErrorRow
}

// NewHistory returns an empty history.
func NewHistory() *History {
	h := &History{latency: map[string]*ring[*hist]{}, phases: map[string]*ring[*hist]{},
		kernels: map[kernelKey]*kernelTotals{}, gpus: map[string]*gpu{},
		engines: map[engineKey]*engineSeries{}, engineLatency: map[string]*ring[*hist]{}}
	for _, k := range engineLatencyMetrics {
		h.engineLatency[k] = &ring[*hist]{}
	}
	for _, k := range latencyMetrics {
		h.latency[k] = &ring[*hist]{}
	}
	for _, k := range phaseMetrics {
		h.phases[k] = &ring[*hist]{}
	}
	return h
}

func newHist() *hist { return &hist{bins: map[float64]int64{}} }

func ms(ts pcommon.Timestamp) int64 { return int64(ts) / 1e6 / 1000 * 1000 }

func mergeHists(dst, src *ring[*hist]) {
	for _, p := range src.pts {
		d := *dst.at(p.t, newHist)
		for b, c := range p.v.bins {
			d.bins[b] += c
		}
		d.count += p.v.count
		d.sum += p.v.sum
		if p.v.min != nil && (d.min == nil || *p.v.min < *d.min) {
			d.min = p.v.min
		}
		if p.v.max != nil && (d.max == nil || *p.v.max > *d.max) {
			d.max = p.v.max
		}
		mergeExp(d, p.v.exp)
	}
}

func zero() float64 { return 0 }

func (h *History) addHist(r *ring[*hist], hg pmetric.Histogram) {
	if hg.AggregationTemporality() != pmetric.AggregationTemporalityDelta {
		return
	}
	for _, dp := range hg.DataPoints().All() {
		if dp.Count() == 0 {
			continue
		}
		(*r.at(ms(dp.Timestamp()), newHist)).add(dp)
	}
}

func str(a pcommon.Map, k string) string {
	if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func number(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// The engines' own latency histograms: the dashboard's latency charts when
// no request spans arrive (tracing off), a cross-check when they do.
var engineLatencyMetrics = map[string]string{
	"vllm:time_to_first_token_seconds":   "ttft",
	"sglang:time_to_first_token_seconds": "ttft",
	"vllm:inter_token_latency_seconds":   "itl",
	"sglang:inter_token_latency_seconds": "itl",
	"vllm:e2e_request_latency_seconds":   "e2e",
	"sglang:e2e_request_latency_seconds": "e2e",
}

type engineKey struct{ service, instance string }

type engineSeries struct {
	kv, running, waiting, preempt ring[float64]
}

func mergeExp(d *hist, e *exphist.Histogram) {
	if e == nil {
		return
	}
	if d.exp == nil {
		d.exp = exphist.New()
	}
	d.exp.Merge(e)
}

func fptr(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return &v
}

func series(r ring[float64], scale float64) [][2]float64 {
	out := make([][2]float64, 0, len(r.pts))
	for _, p := range r.pts {
		out = append(out, [2]float64{float64(p.t), p.v * scale})
	}
	return out
}

// finite reports whether v is a number a chart can draw (not NaN or ±Inf).
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
