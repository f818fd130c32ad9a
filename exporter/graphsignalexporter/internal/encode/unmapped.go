// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// unmapped encodes m under its own name (for the prometheus receiver's
// metrics, the name Graphsignal's Prometheus import gives them).
func (b *metricsBuilder) unmapped(res pcommon.Map, scope string, m pmetric.Metric) {
	name, skip := m.Name(), func(string) bool { return false }
	if b.e.graphsignal() && scope == prometheusScope {
		name = promName(name, m.Type() == pmetric.MetricTypeSum && m.Sum().IsMonotonic())
		skip = func(k string) bool { return promStripped[k] }
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		b.numbers(res, name, signalsv1.Metric_GAUGE_METRIC, m.Gauge().DataPoints(), skip)
	case pmetric.MetricTypeSum:
		b.numbers(res, name, signalsv1.Metric_COUNTER_METRIC, m.Sum().DataPoints(), skip)
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			b.res.addDevice(res, dp.Attributes())
			mm := b.get(name, signalsv1.Metric_HISTOGRAM_METRIC, b.startTags(dp.Attributes(), skip))
			mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
				Value:         &signalsv1.DataPoint_Histogram_{Histogram: histogram(dp)},
				MeasurementTs: b.ts(dp.Timestamp()),
			})
		}
	default:
		if isTwin(m) {
			return // read by the local store (Exponential), not uploaded
		}
		b.st.Skipped += countPoints(m)
	}
}

func (b *metricsBuilder) numbers(res pcommon.Map, name string, typ signalsv1.Metric_MetricType, dps pmetric.NumberDataPointSlice, skip func(string) bool) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		b.res.addDevice(res, dp.Attributes())
		b.point(name, typ, b.startTags(dp.Attributes(), skip), b.ts(dp.Timestamp()), number(dp))
	}
}

func countPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	}
	return 0
}

// histogram maps explicit buckets to non-cumulative bins valued at their
// upper bound. The overflow bucket (+Inf) is folded into the last finite
// bound, as Graphsignal's Prometheus recorder does; empty buckets are left
// out.
func histogram(dp pmetric.HistogramDataPoint) *signalsv1.DataPoint_Histogram {
	h := &signalsv1.DataPoint_Histogram{}
	bounds := dp.ExplicitBounds()
	counts := dp.BucketCounts()
	for i := 0; i < counts.Len(); i++ {
		c := counts.At(i)
		if c == 0 || bounds.Len() == 0 {
			continue
		}
		bin := bounds.At(min(i, bounds.Len()-1))
		if n := len(h.Bins); n > 0 && h.Bins[n-1] == bin {
			h.Counts[n-1] += int64(c)
			continue
		}
		h.Bins = append(h.Bins, bin)
		h.Counts = append(h.Counts, int64(c))
	}
	count := int64(dp.Count())
	h.Count = &count
	if dp.HasSum() {
		s := dp.Sum()
		h.Sum = &s
	}
	if dp.HasMin() {
		v := dp.Min()
		h.Min = &v
	}
	if dp.HasMax() {
		v := dp.Max()
		h.Max = &v
	}
	return h
}
