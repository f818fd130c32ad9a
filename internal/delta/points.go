// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package delta // import "github.com/inferprof/inferprof/internal/delta"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func numberValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

func (c *Converter) gauge(tx *Tx, st *Stats, res [16]byte, name string, in, out pmetric.NumberDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		v := numberValue(dp)
		if dp.ValueType() == pmetric.NumberDataPointValueTypeEmpty || !finite(v) {
			st.Unsupported++
			continue
		}
		s, existed := c.lookup(tx, st, c.key(res, 'g', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		// Graphsignal uploads a gauge only when its timestamp advanced.
		if existed && dp.Timestamp() != 0 && uint64(dp.Timestamp()) <= s.ts {
			continue
		}
		s.ts = uint64(dp.Timestamp())
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetTimestamp(dp.Timestamp())
		o.SetDoubleValue(v)
	}
}

func (c *Converter) sum(tx *Tx, st *Stats, res [16]byte, name string, temp pmetric.AggregationTemporality, in, out pmetric.NumberDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		v := numberValue(dp)
		if dp.ValueType() == pmetric.NumberDataPointValueTypeEmpty || !finite(v) {
			st.Unsupported++
			continue
		}
		d, start := v, dp.StartTimestamp()
		if temp == pmetric.AggregationTemporalityCumulative {
			s, existed := c.lookup(tx, st, c.key(res, 'c', name, dp.Attributes()))
			if s == nil {
				continue
			}
			s.seen = tx.now
			switch {
			case !existed && c.firstIsBaseline(dp.StartTimestamp()):
				d = 0
			case existed && v >= s.value:
				d = v - s.value
				// A delta covers the time since the previous point.
				if s.ts != 0 && s.ts < uint64(dp.Timestamp()) {
					start = pcommon.Timestamp(s.ts)
				}
			}
			// v < s.value is a reset: the full total is the increment.
			s.value = v
			s.ts = uint64(dp.Timestamp())
		}
		if d == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(start)
		o.SetTimestamp(dp.Timestamp())
		o.SetDoubleValue(d)
	}
}

func (c *Converter) histogram(tx *Tx, st *Stats, res [16]byte, name string, temp pmetric.AggregationTemporality, in, out pmetric.HistogramDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		bounds := dp.ExplicitBounds().AsRaw()
		counts := dp.BucketCounts().AsRaw()
		if len(counts) != 0 && len(counts) != len(bounds)+1 {
			st.Unsupported++
			continue
		}
		s, existed := c.lookup(tx, st, c.key(res, 'h', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		count, sum := dp.Count(), dp.Sum()
		dcounts := counts
		if temp == pmetric.AggregationTemporalityCumulative {
			reset := !existed || count < s.count || !slices.Equal(bounds, s.bounds) || len(counts) != len(s.buckets)
			if !reset {
				for b := range counts {
					if counts[b] < s.buckets[b] {
						reset = true
						break
					}
				}
			}
			switch {
			case !existed && c.firstIsBaseline(dp.StartTimestamp()):
				dcounts = make([]uint64, len(counts))
				count, sum = 0, 0
			case !reset:
				dcounts = make([]uint64, len(counts))
				for b := range counts {
					dcounts[b] = counts[b] - s.buckets[b]
				}
				count -= s.count
				sum -= s.sum
			}
			s.count, s.sum, s.buckets, s.bounds = dp.Count(), dp.Sum(), slices.Clone(counts), slices.Clone(bounds)
		}
		// Lifetime extremes: Graphsignal folds them with min/max.
		if dp.HasMin() && finite(dp.Min()) && (!s.hasMin || dp.Min() < s.min) {
			s.min, s.hasMin = dp.Min(), true
		}
		if dp.HasMax() && finite(dp.Max()) && (!s.hasMax || dp.Max() > s.max) {
			s.max, s.hasMax = dp.Max(), true
		}
		if count == 0 && sum == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(dp.StartTimestamp())
		o.SetTimestamp(dp.Timestamp())
		o.SetCount(count)
		if dp.HasSum() {
			o.SetSum(sum)
		}
		o.ExplicitBounds().FromRaw(bounds)
		o.BucketCounts().FromRaw(dcounts)
		if s.hasMin {
			o.SetMin(s.min)
		}
		if s.hasMax {
			o.SetMax(s.max)
		}
	}
}

// summary keeps a summary's count and sum as a histogram without buckets,
// as Graphsignal's client does; quantiles have no Graphsignal field.
func (c *Converter) summary(tx *Tx, st *Stats, res [16]byte, name string, in pmetric.SummaryDataPointSlice, out pmetric.HistogramDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		s, existed := c.lookup(tx, st, c.key(res, 's', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		count, sum := dp.Count(), dp.Sum()
		switch {
		case !existed && c.firstIsBaseline(dp.StartTimestamp()):
			count, sum = 0, 0
		case existed && count >= s.count:
			count -= s.count
			sum -= s.sum
		}
		s.count, s.sum = dp.Count(), dp.Sum()
		if count == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(dp.StartTimestamp())
		o.SetTimestamp(dp.Timestamp())
		o.SetCount(count)
		o.SetSum(sum)
	}
}
