// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package delta turns OTLP metrics into the per-upload deltas Graphsignal
// expects: counters and histograms as increments since the last upload,
// gauges only when their timestamp advanced, histogram min/max as lifetime
// extremes. It runs before the sending queue, so a queued or retried upload
// carries deltas that never need recomputing.
package delta // import "github.com/inferprof/inferprof/internal/delta"

import (
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Convert returns md as deltas, leaving md untouched. The result holds
// gauges (including non-monotonic sums), monotonic sums with delta
// temporality, and histograms with delta temporality (summaries become
// histograms without buckets). Points that carry nothing new are left out.
func (c *Converter) Convert(md pmetric.Metrics) (pmetric.Metrics, *Tx, Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tx := &Tx{pending: map[uint64]*series{}, now: c.now().UnixNano()}
	var st Stats
	out := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := pdatautil.MapHash(rm.Resource().Attributes())
		orm := out.ResourceMetrics().AppendEmpty()
		rm.Resource().CopyTo(orm.Resource())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			osm := orm.ScopeMetrics().AppendEmpty()
			sm.Scope().CopyTo(osm.Scope())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				c.convertMetric(tx, &st, res, ms.At(k), osm.Metrics())
			}
		}
	}
	// Leave out what became empty.
	out.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool { return dataPointCount(m) == 0 })
			return sm.Metrics().Len() == 0
		})
		return rm.ScopeMetrics().Len() == 0
	})
	return out, tx, st
}

// Commit makes tx's state current.
func (c *Converter) Commit(tx *Tx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range tx.pending {
		c.series[k] = s
	}
	now := c.now()
	if now.Sub(c.lastSweep) >= sweepEvery {
		c.lastSweep = now
		cutoff := now.Add(-c.expiry).UnixNano()
		for k, s := range c.series {
			if s.seen < cutoff {
				delete(c.series, k)
			}
		}
	}
}

// Len returns how many series are tracked.
func (c *Converter) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.series)
}

func dataPointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	}
	return 0
}

func newLike(dst pmetric.MetricSlice, m pmetric.Metric) pmetric.Metric {
	om := dst.AppendEmpty()
	om.SetName(m.Name())
	om.SetUnit(m.Unit())
	om.SetDescription(m.Description())
	return om
}

func (c *Converter) convertMetric(tx *Tx, st *Stats, res [16]byte, m pmetric.Metric, dst pmetric.MetricSlice) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		om := newLike(dst, m)
		c.gauge(tx, st, res, m.Name(), m.Gauge().DataPoints(), om.SetEmptyGauge().DataPoints())
	case pmetric.MetricTypeSum:
		s := m.Sum()
		om := newLike(dst, m)
		if !s.IsMonotonic() {
			// An up-down counter is a level: Graphsignal shows it as a gauge.
			c.gauge(tx, st, res, m.Name(), s.DataPoints(), om.SetEmptyGauge().DataPoints())
			return
		}
		os := om.SetEmptySum()
		os.SetIsMonotonic(true)
		os.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.sum(tx, st, res, m.Name(), s.AggregationTemporality(), s.DataPoints(), os.DataPoints())
	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		oh := newLike(dst, m).SetEmptyHistogram()
		oh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.histogram(tx, st, res, m.Name(), h.AggregationTemporality(), h.DataPoints(), oh.DataPoints())
	case pmetric.MetricTypeSummary:
		oh := newLike(dst, m).SetEmptyHistogram()
		oh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.summary(tx, st, res, m.Name(), m.Summary().DataPoints(), oh.DataPoints())
	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		oh := newLike(dst, m).SetEmptyExponentialHistogram()
		oh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.exponential(tx, st, res, m.Name(), h.AggregationTemporality(), h.DataPoints(), oh.DataPoints())
	}
}
