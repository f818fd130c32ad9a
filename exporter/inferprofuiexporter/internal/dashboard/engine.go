// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/bucketquantile"
	"github.com/inferprof/inferprof/internal/names"
)

// The engines' own metrics, scraped from their /metrics under their own
// names (prometheus/engines, docs/engine-metrics.md). Older vLLM releases
// name KV-cache usage gpu_cache_usage_perc.
var engineGauges = map[string]string{
	"vllm:kv_cache_usage_perc":  "kv",
	"vllm:gpu_cache_usage_perc": "kv",
	"sglang:token_usage":        "kv",
	"vllm:num_requests_running": "running",
	"sglang:num_running_reqs":   "running",
	"vllm:num_requests_waiting": "waiting",
	"sglang:num_queue_reqs":     "waiting",
}

// The prometheus receiver keeps a counter's _total; Graphsignal's name for
// it has none.
var enginePreemptions = map[string]bool{"vllm:num_preemptions_total": true, "vllm:num_preemptions": true}

// Where a latency chart's points come from.
const (
	SourceSpans  = "request_spans"  // the inference_metrics connector
	SourceEngine = "engine_metrics" // the engine's own histogram
)

// maxEngines caps the engine instances tracked.
const maxEngines = 64

// engine returns the instance's series, made on first sight; nil past
// maxEngines.
func (h *History) engine(k engineKey) *engineSeries {
	e, ok := h.engines[k]
	if !ok {
		if len(h.engines) >= maxEngines {
			return nil
		}
		e = &engineSeries{}
		h.engines[k] = e
	}
	return e
}

// addEngineMetric takes m when it is one of the engine metrics above.
func (h *History) addEngineMetric(ra pcommon.Map, m pmetric.Metric) bool {
	name := m.Name()
	if key, ok := engineLatencyMetrics[name]; ok {
		if m.Type() == pmetric.MetricTypeHistogram {
			h.addHist(h.engineLatency[key], m.Histogram())
		}
		return true
	}
	kind, gauge := engineGauges[name]
	if !gauge && !enginePreemptions[name] {
		return false
	}
	e := h.engine(engineKey{str(ra, names.ResourceServiceName), str(ra, names.ResourceServiceInstance)})
	if e == nil {
		return true
	}
	switch {
	case gauge && m.Type() == pmetric.MetricTypeGauge:
		// One point per engine core (data parallel) and scrape: usage is
		// the fullest core's, requests add up over the cores of one
		// scrape. A chart point is a second; of the scrapes in it, the
		// fullest counts (a 250 ms scrape interval puts four in one).
		var scrapes map[pcommon.Timestamp]float64
		for _, dp := range m.Gauge().DataPoints().All() {
			v := number(dp)
			if !finite(v) {
				continue
			}
			if kind == "kv" {
				p := e.kv.at(ms(dp.Timestamp()), zero)
				*p = max(*p, v)
				continue
			}
			if scrapes == nil {
				scrapes = map[pcommon.Timestamp]float64{}
			}
			scrapes[dp.Timestamp()] += v
		}
		r := &e.running
		if kind == "waiting" {
			r = &e.waiting
		}
		for ts, v := range scrapes {
			p := r.at(ms(ts), zero)
			*p = max(*p, v)
		}
	case !gauge && m.Type() == pmetric.MetricTypeSum && m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityDelta:
		for _, dp := range m.Sum().DataPoints().All() {
			if v := number(dp); finite(v) && v >= 0 {
				*e.preempt.at(ms(dp.Timestamp()), zero) += v
			}
		}
	}
	return true
}

// mergeEngines adds b's engine series to h's.
func (h *History) mergeEngines(b *History) {
	for key, r := range b.engineLatency {
		mergeHists(h.engineLatency[key], r)
	}
	for k, src := range b.engines {
		dst := h.engine(k)
		if dst == nil {
			continue
		}
		// Gauges keep the second's fullest scrape; preemptions are
		// deltas and add up.
		for _, pair := range [][2]*ring[float64]{{&dst.kv, &src.kv}, {&dst.running, &src.running}, {&dst.waiting, &src.waiting}} {
			for _, p := range pair[1].pts {
				q := pair[0].at(p.t, zero)
				*q = max(*q, p.v)
			}
		}
		for _, p := range src.preempt.pts {
			*dst.preempt.at(p.t, zero) += p.v
		}
	}
}

// buildEngines fills the document's engine part; h.mu is held. A latency
// chart without points from request spans shows the engine's own.
func (h *History) buildEngines(d *Doc) {
	d.Engines = []EngineSeries{}
	for k, e := range h.engines {
		d.Engines = append(d.Engines, EngineSeries{Service: k.service, Instance: k.instance,
			KVCacheUsage: series(e.kv, 1), Running: series(e.running, 1), Waiting: series(e.waiting, 1),
			Preemptions: series(e.preempt, 1)})
	}
	slices.SortFunc(d.Engines, func(a, b EngineSeries) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Instance, b.Instance))
	})
	d.EngineLatency = map[string][]LatencyPoint{}
	for key, r := range h.engineLatency {
		d.EngineLatency[key] = latencyPoints(r)
	}
	d.LatencySource = map[string]string{}
	for key, pts := range d.Latency {
		d.LatencySource[key] = SourceSpans
		if eng := d.EngineLatency[key]; len(pts) == 0 && len(eng) > 0 {
			d.Latency[key], d.LatencySource[key] = eng, SourceEngine
		}
	}
}

// latencyPoints reads one ring's percentiles, as /signals reads them.
func latencyPoints(r *ring[*hist]) []LatencyPoint {
	pts := make([]LatencyPoint, 0, len(r.pts))
	for _, p := range r.pts {
		lp := LatencyPoint{T: p.t, Count: p.v.count, Method: bucketquantile.Method}
		lp.P50, _ = bucketquantile.Quantile(p.v.bins, p.v.min, p.v.max, 0.50)
		lp.P90, _ = bucketquantile.Quantile(p.v.bins, p.v.min, p.v.max, 0.90)
		lp.P99, _ = bucketquantile.Quantile(p.v.bins, p.v.min, p.v.max, 0.99)
		p.v.expQuantiles(&lp)
		pts = append(pts, lp)
	}
	return pts
}
