// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package delta

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// benchInput is n cumulative series (half counters, half 10-bucket
// histograms) at step k, so that consecutive steps have increments.
func benchInput(n, k int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "gpu-node-1")
	rm.Resource().Attributes().PutInt("process.pid", 4242)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	c := ms.AppendEmpty()
	c.SetName("tokens")
	s := c.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	h := ms.AppendEmpty()
	h.SetName("ttft")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	start := pcommon.NewTimestampFromTime(t0.Add(time.Second))
	ts := pcommon.NewTimestampFromTime(t0.Add(time.Duration(k+2) * time.Second))
	for i := 0; i < n; i++ {
		var attrs pcommon.Map
		if i%2 == 0 {
			dp := s.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(int64(100 * (k + 1)))
			attrs = dp.Attributes()
		} else {
			dp := hh.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.ExplicitBounds().FromRaw([]float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
			u := uint64(k + 1)
			dp.BucketCounts().FromRaw([]uint64{0, u, 4 * u, 9 * u, 3 * u, u, 0, 0, u, 0, 0})
			dp.SetCount(19 * u)
			dp.SetSum(4.2 * float64(u))
			attrs = dp.Attributes()
		}
		attrs.PutStr("gen_ai.request.model", "meta-llama/Llama-3.1-8B-Instruct")
		attrs.PutInt("series", int64(i))
	}
	return md
}

// BenchmarkConvert compares the delta step with the least any step that
// produces new pdata pays: copying the input.
func BenchmarkConvert(b *testing.B) {
	for _, n := range []int{100, 1000} {
		in := [2]pmetric.Metrics{benchInput(n, 0), benchInput(n, 1)}
		b.Run(fmt.Sprintf("impl=baseline/points=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				out := pmetric.NewMetrics()
				in[i%2].CopyTo(out)
				i++
			}
		})
		b.Run(fmt.Sprintf("impl=ours/points=%d", n), func(b *testing.B) {
			c := New(t0, time.Now)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// Alternating steps: an increment, then a reset; both emit.
				out, tx, _ := c.Convert(in[i%2])
				c.Commit(tx)
				if out.DataPointCount() != n {
					b.Fatalf("emitted %d of %d", out.DataPointCount(), n)
				}
				i++
			}
		})
	}
}
