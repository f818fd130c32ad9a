// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package dashboard serves the local dashboard (GET /) and its data
// (GET /dashboard.json): latency percentiles over time, the phase breakdown,
// goodput, GPU time by kernel and category, GPU readings per device, and the
// slowest requests with a link into the timeline.
package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"
	"github.com/inferprof/inferprof/internal/names"
)

// maxKernels caps the kernel table; past it kernels are summed per category
// under the name "other", as the cupti receiver does past top_kernels.
const maxKernels = 2000

// maxGPUs caps the devices tracked.
const maxGPUs = 256

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
