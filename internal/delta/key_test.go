// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package delta

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// twoAttrs is sumMetrics with two resource and two point attributes, put in
// the order given.
func twoAttrs(ts time.Time, v int64, reversed bool, pointVal pcommon.Value) pmetric.Metrics {
	md := sumMetrics(t0.Add(time.Second), ts, v, pmetric.AggregationTemporalityCumulative, true)
	rm := md.ResourceMetrics().At(0)
	dp := rm.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	rm.Resource().Attributes().Clear()
	dp.Attributes().Clear()
	if reversed {
		rm.Resource().Attributes().PutStr("service.name", "vllm")
		rm.Resource().Attributes().PutStr("host.name", "h")
		pointVal.CopyTo(dp.Attributes().PutEmpty("gpu"))
		dp.Attributes().PutStr("model", "m")
	} else {
		rm.Resource().Attributes().PutStr("host.name", "h")
		rm.Resource().Attributes().PutStr("service.name", "vllm")
		dp.Attributes().PutStr("model", "m")
		pointVal.CopyTo(dp.Attributes().PutEmpty("gpu"))
	}
	return md
}

// A series is the same series whatever order its attributes arrive in,
// and another series when a value or the metric name differs.
func TestSeriesKey(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	convert(c, twoAttrs(t0.Add(2*time.Second), 10, false, pcommon.NewValueStr("0")))
	out := convert(c, twoAttrs(t0.Add(3*time.Second), 14, true, pcommon.NewValueStr("0")))
	assert.InDelta(t, 4.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0, "reordered attributes: the same series")
	assert.Equal(t, 1, c.Len())

	out = convert(c, twoAttrs(t0.Add(4*time.Second), 20, false, pcommon.NewValueStr("1")))
	assert.InDelta(t, 20.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0, "another value: another series, whole total")
	assert.Equal(t, 2, c.Len())

	renamed := twoAttrs(t0.Add(5*time.Second), 30, false, pcommon.NewValueStr("0"))
	renamed.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("other")
	out = convert(c, renamed)
	assert.InDelta(t, 30.0, only(t, out).Sum().DataPoints().At(0).DoubleValue(), 0, "another name: another series")
	assert.Equal(t, 3, c.Len())
}
