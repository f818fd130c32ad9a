// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package dashboard serves the local dashboard (GET /) and its data
// (GET /dashboard.json): latency percentiles over time, the phase breakdown,
// goodput, GPU time by kernel and category, GPU readings per device, and the
// slowest requests with a link into the timeline.
package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"
	"github.com/inferprof/inferprof/internal/exphist"
	"github.com/inferprof/inferprof/internal/names"
)

// maxPoints is how many flushes of history each chart keeps: an hour at the
// connector's default 15 s flush interval.
const maxPoints = 240

// maxKernels caps the kernel table; past it kernels are summed per category
// under the name "other", as the cupti receiver does past top_kernels.
const maxKernels = 2000

// maxGPUs caps the devices tracked.
const maxGPUs = 256

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

// Collect reads one batch of delta metrics into a history of its own; it
// only reads md, so the batch can go on to a queue that owns it, and the
// result is merged (Merge) only once the batch was accepted.
func Collect(md pmetric.Metrics) *History {
	b := NewHistory()
	b.addReadings(md)
	for _, rm := range md.ResourceMetrics().All() {
		ra := rm.Resource().Attributes()
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				b.addMetric(ra, m)
			}
		}
	}
	return b
}

// Add reads one batch of delta metrics.
func (h *History) Add(md pmetric.Metrics) { h.Merge(Collect(md)) }

// Merge adds what Collect read.
func (h *History) Merge(b *History) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, r := range b.latency {
		mergeHists(h.latency[key], r)
	}
	for key, r := range b.phases {
		mergeHists(h.phases[key], r)
	}
	h.mergeEngines(b)
	for _, p := range b.reqs.pts {
		c := h.reqs.at(p.t, func() counts { return counts{} })
		c.requests += p.v.requests
		c.errors += p.v.errors
		c.good += p.v.good
	}
	if b.hasTargets {
		h.targets, h.hasTargets = b.targets, true
	}
	h.totals.requests += b.totals.requests
	h.totals.errors += b.totals.errors
	h.totals.good += b.totals.good
	for k, v := range b.kernels {
		kt := h.kernel(k)
		kt.seconds += v.seconds
		kt.count += v.count
	}
	for _, g := range b.gpus {
		hg := h.gpu(g.host, g.id, g.name)
		if hg == nil {
			continue
		}
		if g.limit > 0 {
			hg.limit = g.limit
		}
		for _, p := range g.util.pts {
			*hg.util.at(p.t, zero) = p.v
		}
		for _, p := range g.mem.pts {
			*hg.mem.at(p.t, zero) = p.v
		}
		for _, p := range g.pow.pts {
			*hg.pow.at(p.t, zero) = p.v
		}
	}
}

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

func (h *History) addMetric(ra pcommon.Map, m pmetric.Metric) {
	name := m.Name()
	if h.addExponential(m) || h.addEngineMetric(ra, m) {
		return
	}
	if key, ok := latencyMetrics[name]; ok && m.Type() == pmetric.MetricTypeHistogram {
		h.addHist(h.latency[key], m.Histogram())
		return
	}
	if key, ok := phaseMetrics[name]; ok && m.Type() == pmetric.MetricTypeHistogram {
		h.addHist(h.phases[key], m.Histogram())
		return
	}
	switch name {
	case names.MetricGoodputTarget:
		h.addTargets(m)
	case names.MetricRequests, names.MetricGoodput:
		if m.Type() != pmetric.MetricTypeSum || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return
		}
		for _, dp := range m.Sum().DataPoints().All() {
			n := int64(number(dp))
			if n <= 0 {
				continue
			}
			c := h.reqs.at(ms(dp.Timestamp()), func() counts { return counts{} })
			switch {
			case name == names.MetricGoodput:
				c.good += n
				h.totals.good += n
			case str(dp.Attributes(), names.AttrErrorType) != "":
				c.errors += n
				h.totals.errors += n
			default:
				c.requests += n
				h.totals.requests += n
			}
		}
	case names.MetricKernelDuration, names.MetricKernelCount:
		if m.Type() != pmetric.MetricTypeSum || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return
		}
		for _, dp := range m.Sum().DataPoints().All() {
			v := number(dp)
			if v <= 0 || !finite(v) {
				continue
			}
			a := dp.Attributes()
			k := kernelKey{str(a, names.AttrKernelName), str(a, names.AttrKernelCategory)}
			if k.category == "" {
				k.category = "other"
			}
			kt := h.kernel(k)
			if name == names.MetricKernelDuration {
				kt.seconds += v
			} else {
				kt.count += int64(v)
			}
		}
	}
}

// kernel returns k's totals, made on first sight; past maxKernels a new
// kernel is summed into its category's "other".
func (h *History) kernel(k kernelKey) *kernelTotals {
	if kt, ok := h.kernels[k]; ok {
		return kt
	}
	if len(h.kernels) >= maxKernels {
		k.name = "other"
		if kt, ok := h.kernels[k]; ok {
			return kt
		}
	}
	kt := &kernelTotals{}
	h.kernels[k] = kt
	return kt
}

// gpu returns the device's history, made on first sight; nil past maxGPUs.
func (h *History) gpu(host, id, name string) *gpu {
	g, ok := h.gpus[host+"/"+id]
	if !ok {
		if len(h.gpus) >= maxGPUs {
			return nil
		}
		g = &gpu{host: host, id: id}
		h.gpus[host+"/"+id] = g
	}
	if name != "" {
		g.name = name
	}
	return g
}

// addReadings keeps the NVML readings of one batch per device.
func (h *History) addReadings(md pmetric.Metrics) {
	for _, r := range timeline.Readings(md) {
		g := h.gpu(r.Host, r.Device, r.DeviceName)
		if g == nil {
			continue
		}
		t := r.TS / 1e9 * 1000
		switch r.Metric {
		case "hw.gpu.utilization":
			*g.util.at(t, zero) = r.Value
		case "hw.gpu.memory.usage":
			*g.mem.at(t, zero) = r.Value
		case "hw.gpu.memory.limit":
			g.limit = r.Value
		case "hw.power":
			*g.pow.at(t, zero) = r.Value
		}
	}
}

func zero() float64 { return 0 }

// addTargets reads the connector's goodput targets: one gauge point per
// target set, so a criterion without a point has none.
func (h *History) addTargets(m pmetric.Metric) {
	if m.Type() != pmetric.MetricTypeGauge {
		return
	}
	var t Targets
	for _, dp := range m.Gauge().DataPoints().All() {
		v := number(dp)
		if v <= 0 || !finite(v) {
			continue
		}
		switch str(dp.Attributes(), names.AttrGoodputCriterion) {
		case names.GoodputTTFT:
			t.TTFT = v
		case names.GoodputTPOT:
			t.TPOT = v
		case names.GoodputE2E:
			t.E2E = v
		}
	}
	h.targets, h.hasTargets = t, true
}

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
