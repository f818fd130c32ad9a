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

	"github.com/inferprof/inferprof/internal/exphist"
)

// expMetrics is one cumulative exponential histogram point of values.
func expMetrics(start, ts time.Time, values ...float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("inferprof.exponential.server.time_to_first_token")
	eh := m.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := eh.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	h := exphist.New()
	for _, v := range values {
		h.Observe(v)
	}
	h.AppendTo(dp)
	return md
}

// Cumulative exponential points become the increments between them, read
// back with the interval's values only; a reset sends the whole point.
func TestExponentialDeltas(t *testing.T) {
	c := New(t0, func() time.Time { return t0 })
	first := []float64{0.1, 0.2, 0.3}
	out := convert(c, expMetrics(t0, t0.Add(time.Second), first...))
	dp := only(t, out).ExponentialHistogram().DataPoints().At(0)
	assert.Equal(t, uint64(3), dp.Count())
	assert.Equal(t, pmetric.AggregationTemporalityDelta, only(t, out).ExponentialHistogram().AggregationTemporality())

	all := append(append([]float64{}, first...), 2, 2, 2, 2)
	out = convert(c, expMetrics(t0, t0.Add(2*time.Second), all...))
	dp = only(t, out).ExponentialHistogram().DataPoints().At(0)
	assert.Equal(t, uint64(4), dp.Count())
	h, ok := exphist.FromPoint(dp)
	require.True(t, ok)
	p50, _ := h.Quantile(0.5)
	assert.InEpsilon(t, 2, p50, exphist.RelativeError(h.Scale()), "only the interval's values")
	assert.InDelta(t, 0.1, dp.Min(), 1e-12, "min is lifetime")

	// Restart: fewer values than before.
	out = convert(c, expMetrics(t0.Add(3*time.Second), t0.Add(4*time.Second), 5))
	dp = only(t, out).ExponentialHistogram().DataPoints().At(0)
	assert.Equal(t, uint64(1), dp.Count())
}
