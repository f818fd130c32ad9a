// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/internal/exphist"
	"github.com/inferprof/inferprof/internal/exphist/exphisttest"
	"github.com/inferprof/inferprof/internal/names"
)

// expPoint is the one data point of an exponential metric.
func expPoint(t *testing.T, md pmetric.Metrics, name string) pmetric.ExponentialHistogramDataPoint {
	t.Helper()
	ms := metricsNamed(md, name)
	require.Len(t, ms, 1, name)
	require.Equal(t, pmetric.MetricTypeExponentialHistogram, ms[0].Type(), name)
	require.Equal(t, 1, ms[0].ExponentialHistogram().DataPoints().Len(), name)
	return ms[0].ExponentialHistogram().DataPoints().At(0)
}

// 300 lognormal TTFTs: the exponential twin's percentiles are within 2% of
// the exact ones, where the semconv buckets are not; the explicit metric is
// still there, unchanged.
func TestExponentialTwinPercentiles(t *testing.T) {
	h := newHarness(t, nil)
	r := rand.New(rand.NewPCG(300, 1))
	var ttfts []float64
	td, spans := batch(vllmResource)
	for range 300 {
		v := 0.159 * math.Exp(0.6*r.NormFloat64())
		ttfts = append(ttfts, v)
		h.addSpan(spans, "llm_request", 2*time.Second, canonical("llama", v, v+1.5, 0.001, v, 1, 10, 10))
	}
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	assert.Equal(t, uint64(300), histPoints(t, md, names.MetricTimeToFirstToken)[llama].Count())
	m := metricsNamed(md, names.MetricExpTimeToFirstToken)[0]
	assert.Equal(t, "s", m.Unit())
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.ExponentialHistogram().AggregationTemporality())
	dp := expPoint(t, md, names.MetricExpTimeToFirstToken)
	assert.Equal(t, llama, attrString(dp.Attributes()), "the explicit metric's dimensions")
	assert.Equal(t, uint64(300), dp.Count())
	hist, ok := exphist.FromPoint(dp)
	require.True(t, ok)
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		got, _ := hist.Quantile(q)
		want := exphisttest.NearestRank(ttfts, q)
		assert.LessOrEqual(t, math.Abs(got-want)/want, 0.02, "p%v: %v against exact %v", q*100, got, want)
	}
	for _, n := range []string{names.MetricExpRequestDuration, names.MetricExpQueueDuration, names.MetricExpPrefillDuration, names.MetricExpDecodeDuration, names.MetricExpOtherDuration} {
		assert.Equal(t, uint64(300), expPoint(t, md, n).Count(), n)
	}
}

// Every batch had one request: the exponential batch size reads 1 at every
// percentile (the explicit buckets' estimate read 0.5 in the Grafana panel).
func TestExponentialAllOnesBatchSize(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(map[string]any{"service.name": "vllm-server", names.ResourceEngineName: "vllm"})
	for range 50 {
		h.addSpan(spans, names.SpanEngineStep, 10*time.Millisecond, map[string]any{
			names.AttrStepPrefillReqs: 0, names.AttrStepDecodeReqs: 1, names.AttrStepScheduledToks: 1,
		})
	}
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	for _, n := range []string{names.MetricExpStepBatchSize, names.MetricExpStepTokens} {
		hist, ok := exphist.FromPoint(expPoint(t, md, n))
		require.True(t, ok)
		for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
			v, _ := hist.Quantile(q)
			assert.Equal(t, 1.0, v, "%s p%v", n, q*100)
		}
	}
	hist, _ := exphist.FromPoint(expPoint(t, md, names.MetricExpStepDuration))
	v, _ := hist.Quantile(0.5)
	assert.InEpsilon(t, 0.010, v, 1e-9)
}

// Delta temporality: each interval's twin holds that interval only; an
// exponential metric can be switched off by name, and the explicit one
// stays.
func TestExponentialDeltaAndDisabled(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AggregationTemporality = TemporalityDelta
		c.Metrics = map[string]MetricConfig{names.MetricExpRequestDuration: {Enabled: false}}
	})
	send := func(ttft float64) {
		td, spans := batch(vllmResource)
		h.addSpan(spans, "llm_request", time.Second, canonical("llama", ttft, 1, 0, ttft, 0.5, 10, 10))
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	}
	send(0.1)
	md := h.flush(t, 15*time.Second)
	assert.Equal(t, uint64(1), expPoint(t, md, names.MetricExpTimeToFirstToken).Count())
	assert.Empty(t, metricsNamed(md, names.MetricExpRequestDuration))
	assert.NotEmpty(t, metricsNamed(md, names.MetricRequestDuration))
	send(0.3)
	send(0.3)
	md = h.flush(t, 15*time.Second)
	dp := expPoint(t, md, names.MetricExpTimeToFirstToken)
	assert.Equal(t, uint64(2), dp.Count())
	assert.InDelta(t, 0.3, dp.Min(), 1e-12, "the first interval's 0.1 is gone")
}

// oursExplicitOnly is the connector with every exponential twin switched
// off: the baseline of BenchmarkExponentialCost.
func oursExplicitOnly(tb testing.TB, next consumer.Metrics, limit int) connector.Traces {
	tb.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.AggregationCardinalityLimit = limit
	cfg.Metrics = map[string]MetricConfig{}
	for _, s := range aggregate.ExponentialSpecs() {
		cfg.Metrics[s.Name] = MetricConfig{Enabled: false}
	}
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(tb, err)
	return c
}

// BenchmarkExponentialCost: the connector per request span with and
// without the exponential twins, interleaved in one run (benchstat -col
// /impl).
func BenchmarkExponentialCost(b *testing.B) {
	td := vllmBatch(1000, true)
	for _, impl := range []struct {
		name string
		new  func(testing.TB, consumer.Metrics, int) connector.Traces
	}{{"explicit_only", oursExplicitOnly}, {"with_exponential", ours}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			c := impl.new(b, consumertest.NewNop(), 5000)
			startTraces(b, c)
			ctx := context.Background()
			require.NoError(b, c.ConsumeTraces(ctx, td))
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if err := c.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
			}
			// cpu-ns/span is the steadier figure on a shared machine.
			reportSpans(b, 1000, cpuTime()-cpu)
		})
	}
}
