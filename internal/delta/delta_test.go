// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package delta

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var t0 = time.Unix(1_700_000_000, 0)

func sumMetrics(start, ts time.Time, v int64, temp pmetric.AggregationTemporality, monotonic bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "h")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("c")
	s := m.SetEmptySum()
	s.SetIsMonotonic(monotonic)
	s.SetAggregationTemporality(temp)
	dp := s.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetIntValue(v)
	dp.Attributes().PutStr("k", "v")
	return md
}

func only(t *testing.T, md pmetric.Metrics) pmetric.Metric {
	t.Helper()
	require.Equal(t, 1, md.ResourceMetrics().Len())
	require.Equal(t, 1, md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().Len())
	return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
}

func convert(c *Converter, md pmetric.Metrics) pmetric.Metrics {
	out, tx, _ := c.Convert(md)
	c.Commit(tx)
	return out
}

func TestCumulativeSum(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	cum := pmetric.AggregationTemporalityCumulative
	// Began after the converter: the first point is the whole total.
	out := convert(c, sumMetrics(t0.Add(time.Second), t0.Add(2*time.Second), 10, cum, true))
	m := only(t, out)
	assert.Equal(t, pmetric.AggregationTemporalityDelta, m.Sum().AggregationTemporality())
	assert.InDelta(t, 10.0, m.Sum().DataPoints().At(0).DoubleValue(), 0)
	assert.Equal(t, "h", func() string {
		v, _ := out.ResourceMetrics().At(0).Resource().Attributes().Get("host.name")
		return v.Str()
	}())

	out = convert(c, sumMetrics(t0.Add(time.Second), t0.Add(3*time.Second), 14, cum, true))
	assert.InDelta(t, 4.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0)
	// No change: nothing to send.
	out = convert(c, sumMetrics(t0.Add(time.Second), t0.Add(4*time.Second), 14, cum, true))
	assert.Equal(t, 0, out.DataPointCount())
	// Reset: the full total.
	out = convert(c, sumMetrics(t0.Add(5*time.Second), t0.Add(6*time.Second), 3, cum, true))
	assert.InDelta(t, 3.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0)
}

func TestSeriesOlderThanConverterIsBaseline(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	cum := pmetric.AggregationTemporalityCumulative
	// Counting began before us (a collector restart): the total may already
	// have been uploaded, so it is only the baseline.
	out := convert(c, sumMetrics(t0.Add(-time.Hour), t0.Add(time.Second), 1000, cum, true))
	assert.Equal(t, 0, out.DataPointCount())
	out = convert(c, sumMetrics(t0.Add(-time.Hour), t0.Add(2*time.Second), 1005, cum, true))
	assert.InDelta(t, 5.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0)
}

func TestUncommittedConvertLeavesState(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	cum := pmetric.AggregationTemporalityCumulative
	convert(c, sumMetrics(t0, t0.Add(time.Second), 10, cum, true))
	// The queue refused this batch: no Commit.
	_, _, _ = c.Convert(sumMetrics(t0, t0.Add(2*time.Second), 15, cum, true))
	out := convert(c, sumMetrics(t0, t0.Add(3*time.Second), 20, cum, true))
	assert.InDelta(t, 10.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0, "10→20, nothing lost")
}

func TestDeltaSumAndUpDownCounter(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	out := convert(c, sumMetrics(t0, t0.Add(time.Second), 7, pmetric.AggregationTemporalityDelta, true))
	assert.InDelta(t, 7.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0)
	out = convert(c, sumMetrics(t0, t0.Add(time.Second), 7, pmetric.AggregationTemporalityDelta, true))
	assert.InDelta(t, 7.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0, "deltas pass through")
	out = convert(c, sumMetrics(t0, t0.Add(time.Second), -3, pmetric.AggregationTemporalityCumulative, false))
	m := only(t, out)
	assert.Equal(t, pmetric.MetricTypeGauge, m.Type(), "an up-down counter is a level")
	assert.InDelta(t, -3.0, m.Gauge().DataPoints().At(0).DoubleValue(), 0)
}

func TestGaugeOnlyWhenTimestampAdvances(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	g := func(ts time.Time, v float64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetDoubleValue(v)
		return md
	}
	assert.Equal(t, 1, convert(c, g(t0.Add(time.Second), 1)).DataPointCount())
	assert.Equal(t, 0, convert(c, g(t0.Add(time.Second), 2)).DataPointCount())
	assert.Equal(t, 1, convert(c, g(t0.Add(2*time.Second), 3)).DataPointCount())
}

func histMetrics(ts time.Time, counts []uint64, sum, lo, hi float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	h := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.ExplicitBounds().FromRaw([]float64{1, 2})
	dp.BucketCounts().FromRaw(counts)
	var n uint64
	for _, c := range counts {
		n += c
	}
	dp.SetCount(n)
	dp.SetSum(sum)
	dp.SetMin(lo)
	dp.SetMax(hi)
	return md
}

func TestHistogram(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	out := convert(c, histMetrics(t0.Add(time.Second), []uint64{1, 1, 0}, 2, 0.5, 1.5))
	dp := only(t, out).Histogram().DataPoints().At(0)
	assert.Equal(t, []uint64{1, 1, 0}, dp.BucketCounts().AsRaw())
	out = convert(c, histMetrics(t0.Add(2*time.Second), []uint64{1, 3, 1}, 9, 0.5, 5))
	dp = only(t, out).Histogram().DataPoints().At(0)
	assert.Equal(t, pmetric.AggregationTemporalityDelta, only(t, out).Histogram().AggregationTemporality())
	assert.Equal(t, []uint64{0, 2, 1}, dp.BucketCounts().AsRaw())
	assert.Equal(t, uint64(3), dp.Count())
	assert.InDelta(t, 7.0, dp.Sum(), 0)
	assert.InDelta(t, 0.5, dp.Min(), 0)
	assert.InDelta(t, 5.0, dp.Max(), 0)
	// Nothing new: left out.
	assert.Equal(t, 0, convert(c, histMetrics(t0.Add(3*time.Second), []uint64{1, 3, 1}, 9, 0.5, 5)).DataPointCount())
	// A reset sends the whole histogram.
	out = convert(c, histMetrics(t0.Add(4*time.Second), []uint64{0, 1, 0}, 1.5, 1.5, 1.5))
	dp = only(t, out).Histogram().DataPoints().At(0)
	assert.Equal(t, []uint64{0, 1, 0}, dp.BucketCounts().AsRaw())
	assert.InDelta(t, 0.5, dp.Min(), 0, "min is lifetime")
}

func TestUnsupportedAndOverflow(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty().SetScale(21) // finer than any SDK
	bad := ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty()
	bad.ExplicitBounds().FromRaw([]float64{1})
	bad.BucketCounts().FromRaw([]uint64{1, 2, 3}) // one too many
	_, _, st := c.Convert(md)
	assert.Equal(t, 2, st.Unsupported)

	c.maxSeries = 1
	convert(c, sumMetrics(t0, t0.Add(time.Second), 1, pmetric.AggregationTemporalityCumulative, true))
	_, _, st = c.Convert(histMetrics(t0.Add(time.Second), []uint64{1, 0, 0}, 1, 1, 1))
	assert.Equal(t, 1, st.Overflow)
}

func TestExpiry(t *testing.T) {
	now := t0
	c := New(t0, func() time.Time { return now })
	convert(c, sumMetrics(t0, t0.Add(time.Second), 1, pmetric.AggregationTemporalityCumulative, true))
	require.Equal(t, 1, c.Len())
	now = t0.Add(DefaultExpiry + 2*time.Minute)
	convert(c, pmetric.NewMetrics())
	assert.Equal(t, 0, c.Len())
}
