// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"context"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.yaml.in/yaml/v3"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadatatest"
	"github.com/inferprof/inferprof/internal/names"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// harness is a connector on a fake clock feeding a sink.
type harness struct {
	c     *metricsConnector
	sink  *consumertest.MetricsSink
	clock *clockwork.FakeClock
	tel   *componenttest.Telemetry
	ids   byte
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	h := &harness{sink: new(consumertest.MetricsSink), clock: clockwork.NewFakeClockAt(t0), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	c, err := newConnector(metadatatest.NewSettings(h.tel), cfg, h.sink, h.clock)
	require.NoError(t, err)
	h.c = c
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	return h
}

// flush advances the clock by d and flushes, returning what was emitted.
func (h *harness) flush(t *testing.T, d time.Duration) pmetric.Metrics {
	t.Helper()
	h.sink.Reset()
	h.clock.Advance(d)
	h.c.flush(t.Context(), false)
	all := h.sink.AllMetrics()
	if len(all) == 0 {
		return pmetric.NewMetrics()
	}
	require.Len(t, all, 1)
	return all[0]
}

// batch starts a trace batch with one resource.
func batch(resAttrs map[string]any) (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	_ = rs.Resource().Attributes().FromRaw(resAttrs)
	return td, rs.ScopeSpans().AppendEmpty().Spans()
}

var vllmResource = map[string]any{"service.name": "vllm-server", "host.name": "gpu-1"}

// addSpan appends a span with attrs lasting dur, ending at t0, with fresh ids.
func (h *harness) addSpan(spans ptrace.SpanSlice, name string, dur time.Duration, attrs map[string]any) ptrace.Span {
	h.ids++
	s := spans.AppendEmpty()
	s.SetName(name)
	s.SetTraceID(pcommon.TraceID{1, h.ids})
	s.SetSpanID(pcommon.SpanID{2, h.ids})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(-dur)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0))
	if err := s.Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
	return s
}

// canonical returns what the inference processor writes on a vLLM request.
func canonical(model string, ttft, e2e, queue, prefill, decode float64, in, out int64) map[string]any {
	return map[string]any{
		names.AttrTimeToFirstToken: ttft,
		names.AttrE2E:              e2e,
		names.AttrTimeInQueue:      queue,
		names.AttrTimeInPrefill:    prefill,
		names.AttrTimeInDecode:     decode,
		names.AttrTimeInOther:      e2e - queue - prefill - decode,
		names.AttrInputTokens:      in,
		names.AttrOutputTokens:     out,
		names.AttrProviderName:     names.ProviderVLLM,
		names.AttrRequestModel:     model,
		names.AttrOperationName:    "chat",
		// vLLM's own attributes ride along and must be ignored.
		"gen_ai.usage.prompt_tokens": in,
		"gen_ai.request.id":          "chatcmpl-1",
	}
}

func metricsNamed(md pmetric.Metrics, name string) []pmetric.Metric {
	var out []pmetric.Metric
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() == name {
					out = append(out, ms.At(k))
				}
			}
		}
	}
	return out
}

// histPoints returns the data points of histogram name, keyed by their
// attributes rendered as a string.
func histPoints(t *testing.T, md pmetric.Metrics, name string) map[string]pmetric.HistogramDataPoint {
	t.Helper()
	return histPointsBy(t, md, name, attrString)
}

func histPointsBy(t *testing.T, md pmetric.Metrics, name string, key func(pcommon.Map) string) map[string]pmetric.HistogramDataPoint {
	t.Helper()
	out := map[string]pmetric.HistogramDataPoint{}
	for _, m := range metricsNamed(md, name) {
		require.Equal(t, pmetric.MetricTypeHistogram, m.Type(), name)
		for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
			dp := m.Histogram().DataPoints().At(i)
			out[key(dp.Attributes())] = dp
		}
	}
	return out
}

func sumPoints(t *testing.T, md pmetric.Metrics, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, m := range metricsNamed(md, name) {
		require.Equal(t, pmetric.MetricTypeSum, m.Type(), name)
		require.True(t, m.Sum().IsMonotonic())
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			out[attrString(dp.Attributes())] = dp.IntValue()
		}
	}
	return out
}

func attrString(m pcommon.Map) string {
	c := pcommon.NewMap()
	m.CopyTo(c)
	c.Remove(names.AttrOperationName)
	c.Remove(names.AttrProviderName)
	s := ""
	// Sorted for a stable key.
	keys := []string{names.AttrRequestModel, names.AttrErrorType, names.AttrTokenType, names.AttrMetricOverflow, "inferprof.lora.adapter"}
	for _, k := range keys {
		if v, ok := c.Get(k); ok {
			s += k + "=" + v.AsString() + ";"
		}
	}
	return s
}

const llama = "gen_ai.request.model=llama;"

func TestRequestMetrics(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	// TTFT 0.05 → bucket index 5 (0.04, 0.06]; 0.3 → index 9 (0.25, 0.5]; 3 → index 13 (2.5, 5].
	a := canonical("llama", 0.05, 1.0, 0.01, 0.04, 0.9, 100, 11)
	a[names.AttrTimePerOutputTok] = 0.09
	a[names.AttrITLGaps] = []any{0.08, 0.09, 0.1}
	h.addSpan(spans, "llm_request", time.Second, a)
	b := canonical("llama", 0.3, 2.0, 0.2, 0.1, 1.5, 200, 6) // no TPOT attribute: 1.5/(6-1) = 0.3
	h.addSpan(spans, "llm_request", 2*time.Second, b)
	c := canonical("llama", 3, 4.0, 2.5, 0.5, 0.9, 50, 1) // misses the 2 s TTFT target
	h.addSpan(spans, "llm_request", 4*time.Second, c)
	failed := canonical("llama", 0.1, 0.5, 0.1, 0.1, 0.2, 10, 3)
	failed[names.AttrErrorType] = "abort"
	h.addSpan(spans, "llm_request", time.Second/2, failed)
	h.addSpan(spans, "http_request", time.Second, map[string]any{"http.route": "/v1/chat"}) // not a request span
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))

	md := h.flush(t, 15*time.Second)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	res := md.ResourceMetrics().At(0)
	assert.Equal(t, map[string]any{"service.name": "vllm-server", "host.name": "gpu-1"}, res.Resource().Attributes().AsRaw())
	assert.Equal(t, "github.com/inferprof/inferprof/connector/inferencemetricsconnector", res.ScopeMetrics().At(0).Scope().Name())

	ttft := histPoints(t, md, names.MetricTimeToFirstToken)
	require.Len(t, ttft, 1, "failed requests have no TTFT point")
	dp := ttft[llama]
	assert.Equal(t, uint64(3), dp.Count())
	assert.InDelta(t, 3.35, dp.Sum(), 1e-9)
	assert.InDelta(t, 0.05, dp.Min(), 1e-12)
	assert.InDelta(t, 3.0, dp.Max(), 1e-12)
	assert.Equal(t, aggregate.BoundsTTFT, dp.ExplicitBounds().AsRaw())
	wantBuckets := make([]uint64, len(aggregate.BoundsTTFT)+1)
	wantBuckets[5], wantBuckets[9], wantBuckets[13] = 1, 1, 1
	assert.Equal(t, wantBuckets, dp.BucketCounts().AsRaw())
	assert.Equal(t, map[string]any{
		names.AttrOperationName: "chat", names.AttrProviderName: "vllm", names.AttrRequestModel: "llama",
	}, dp.Attributes().AsRaw())
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), dp.StartTimestamp())
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(15*time.Second)), dp.Timestamp())
	require.Equal(t, 3, dp.Exemplars().Len())
	ex := dp.Exemplars().At(0)
	assert.InDelta(t, 0.05, ex.DoubleValue(), 1e-12)
	assert.Equal(t, pcommon.TraceID{1, 1}, ex.TraceID())
	assert.Equal(t, pcommon.SpanID{2, 1}, ex.SpanID())
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), ex.Timestamp())

	tpot := histPoints(t, md, names.MetricTimePerOutputToken)[llama]
	assert.Equal(t, uint64(2), tpot.Count(), "request c has 1 output token: no TPOT")
	assert.InDelta(t, 0.09+0.3, tpot.Sum(), 1e-9)

	dur := histPoints(t, md, names.MetricRequestDuration)
	require.Len(t, dur, 2)
	assert.Equal(t, uint64(3), dur[llama].Count())
	assert.InDelta(t, 7.0, dur[llama].Sum(), 1e-9)
	abort := dur[llama+"error.type=abort;"]
	assert.Equal(t, uint64(1), abort.Count())
	assert.InDelta(t, 0.5, abort.Sum(), 1e-9)
	assert.Equal(t, "abort", func() string { v, _ := abort.Attributes().Get(names.AttrErrorType); return v.Str() }())

	for name, want := range map[string]float64{
		names.MetricQueueDuration:   0.01 + 0.2 + 2.5,
		names.MetricPrefillDuration: 0.04 + 0.1 + 0.5,
		names.MetricDecodeDuration:  0.9 + 1.5 + 0.9,
		names.MetricOtherDuration:   (1 - 0.95) + (2 - 1.8) + (4 - 3.9),
	} {
		p := histPoints(t, md, name)[llama]
		assert.Equal(t, uint64(3), p.Count(), name)
		assert.InDelta(t, want, p.Sum(), 1e-9, name)
	}

	itl := histPoints(t, md, names.MetricInterTokenLatency)[llama]
	assert.Equal(t, uint64(3), itl.Count())
	assert.InDelta(t, 0.27, itl.Sum(), 1e-9)

	usage := histPoints(t, md, names.MetricTokenUsage)
	assert.Equal(t, uint64(3), usage[llama+"gen_ai.token.type=input;"].Count())
	assert.InDelta(t, 350, usage[llama+"gen_ai.token.type=input;"].Sum(), 0)
	assert.InDelta(t, 18, usage[llama+"gen_ai.token.type=output;"].Sum(), 0)
	assert.InDelta(t, 3, usage[llama+"error.type=abort;gen_ai.token.type=output;"].Sum(), 0)

	assert.Equal(t, map[string]int64{
		llama + "gen_ai.token.type=input;":                   350,
		llama + "gen_ai.token.type=output;":                  18,
		llama + "error.type=abort;gen_ai.token.type=input;":  10,
		llama + "error.type=abort;gen_ai.token.type=output;": 3,
	}, sumPoints(t, md, names.MetricTokens))
	assert.Equal(t, map[string]int64{llama: 3, llama + "error.type=abort;": 1}, sumPoints(t, md, names.MetricRequests))
	// a and b meet TTFT 2 s and TPOT 100 ms? a yes (0.09), b no (TPOT 0.3), c no (TTFT 3 s).
	assert.Equal(t, map[string]int64{llama: 1}, sumPoints(t, md, names.MetricGoodput))

	assert.Empty(t, metricsNamed(md, names.MetricStepDuration), "no engine.step spans were sent")
	metadatatest.AssertEqualConnectorInferenceMetricsSeries(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

func TestGoodputTargets(t *testing.T) {
	tests := []struct {
		name    string
		goodput GoodputConfig
		attrs   map[string]any
		good    bool
	}{
		{"all met", GoodputConfig{TimeToFirstToken: time.Second, TimePerOutputToken: 50 * time.Millisecond, E2E: 2 * time.Second},
			map[string]any{names.AttrTimeToFirstToken: 0.5, names.AttrTimePerOutputTok: 0.05, names.AttrE2E: 2.0}, true},
		{"ttft missed", GoodputConfig{TimeToFirstToken: time.Second},
			map[string]any{names.AttrTimeToFirstToken: 1.01, names.AttrE2E: 2.0}, false},
		{"e2e missed", GoodputConfig{E2E: time.Second},
			map[string]any{names.AttrTimeToFirstToken: 0.1, names.AttrE2E: 1.5}, false},
		{"ttft target, no ttft", GoodputConfig{TimeToFirstToken: time.Second},
			map[string]any{names.AttrE2E: 0.5}, false},
		{"one output token meets tpot", GoodputConfig{TimePerOutputToken: time.Millisecond},
			map[string]any{names.AttrE2E: 0.5, names.AttrOutputTokens: 1}, true},
		{"tpot unknown misses", GoodputConfig{TimePerOutputToken: time.Second},
			map[string]any{names.AttrE2E: 0.5, names.AttrOutputTokens: 5}, false},
		{"no targets", GoodputConfig{}, map[string]any{names.AttrE2E: 100.0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Goodput = tt.goodput })
			td, spans := batch(vllmResource)
			h.addSpan(spans, "llm_request", time.Second, tt.attrs)
			require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
			md := h.flush(t, time.Second)
			want := int64(0)
			if tt.good {
				want = 1
			}
			assert.Equal(t, map[string]int64{"": want}, sumPoints(t, md, names.MetricGoodput))
			assert.Equal(t, map[string]int64{"": 1}, sumPoints(t, md, names.MetricRequests))
		})
	}
}

func TestErrorStatusWithoutErrorType(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	s := h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.8, 5, 5))
	s.Status().SetCode(ptrace.StatusCodeError)
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	assert.Empty(t, histPoints(t, md, names.MetricTimeToFirstToken))
	assert.Equal(t, map[string]int64{llama + "error.type=_OTHER;": 1}, sumPoints(t, md, names.MetricRequests))
	assert.Empty(t, sumPoints(t, md, names.MetricGoodput))
}

func TestRequestDurationFallsBackToSpan(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	h.addSpan(spans, "llm_request", 1500*time.Millisecond, map[string]any{names.AttrTimeToFirstToken: 0.2})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	assert.InDelta(t, 1.5, histPoints(t, md, names.MetricRequestDuration)[""].Sum(), 1e-9)
}

// The inference processor's phase spans are skipped, by name and marker:
// a caller's span of the same name without the marker that carries request
// figures is still a request.
func TestPhaseSpansAreNotRequests(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	h.addSpan(spans, names.SpanPhaseQueue, time.Second, map[string]any{names.AttrTimeToFirstToken: 0.2, names.AttrSynthetic: true})
	h.addSpan(spans, names.SpanPhaseQueue, time.Second, map[string]any{names.AttrTimeToFirstToken: 0.3})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	ttft := histPoints(t, md, names.MetricTimeToFirstToken)[""]
	assert.Equal(t, uint64(1), ttft.Count())
	assert.InDelta(t, 0.3, ttft.Sum(), 1e-9)
}

func TestStepMetrics(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(map[string]any{"service.name": "vllm-server", names.ResourceEngineName: "vllm", names.ResourceProcessPID: 42})
	h.addSpan(spans, names.SpanEngineStep, 20*time.Millisecond, map[string]any{
		names.AttrStepPrefillReqs: 1, names.AttrStepDecodeReqs: 7, names.AttrStepScheduledToks: 519,
		names.AttrStepPreempted: []any{"req-1", "req-2"},
	})
	h.addSpan(spans, names.SpanEngineStep, 12*time.Millisecond, map[string]any{
		names.AttrStepPrefillReqs: 0, names.AttrStepDecodeReqs: 8, names.AttrStepScheduledToks: 8,
	})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)

	dur := histPoints(t, md, names.MetricStepDuration)[""]
	assert.Equal(t, uint64(2), dur.Count())
	assert.InDelta(t, 0.032, dur.Sum(), 1e-9)
	assert.Equal(t, 0, dur.Attributes().Len())
	require.Equal(t, 2, dur.Exemplars().Len())
	batchSize := histPoints(t, md, names.MetricStepBatchSize)[""]
	assert.InDelta(t, 16, batchSize.Sum(), 0)
	assert.Equal(t, uint64(2), batchSize.BucketCounts().At(3), "8 falls in (4, 8]")
	tokens := histPoints(t, md, names.MetricStepTokens)[""]
	assert.InDelta(t, 527, tokens.Sum(), 0)
	assert.Equal(t, map[string]int64{"": 2}, sumPoints(t, md, names.MetricPreemptions))
	assert.Empty(t, metricsNamed(md, names.MetricRequests))
	assert.Equal(t, int64(42), md.ResourceMetrics().At(0).Resource().Attributes().AsRaw()[names.ResourceProcessPID])
}

func TestTemporality(t *testing.T) {
	send := func(t *testing.T, h *harness, ttft float64) {
		td, spans := batch(vllmResource)
		h.addSpan(spans, "llm_request", time.Second, canonical("llama", ttft, 1, 0, ttft, 0.5, 10, 10))
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	}
	t.Run("cumulative", func(t *testing.T) {
		h := newHarness(t, nil)
		send(t, h, 0.1)
		first := histPoints(t, h.flush(t, 15*time.Second), names.MetricTimeToFirstToken)[llama]
		assert.Equal(t, uint64(1), first.Count())
		assert.Equal(t, 1, first.Exemplars().Len())
		send(t, h, 0.2)
		md := h.flush(t, 15*time.Second)
		m := metricsNamed(md, names.MetricTimeToFirstToken)[0]
		assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Histogram().AggregationTemporality())
		second := histPoints(t, md, names.MetricTimeToFirstToken)[llama]
		assert.Equal(t, uint64(2), second.Count())
		assert.InDelta(t, 0.3, second.Sum(), 1e-9)
		assert.Equal(t, pcommon.NewTimestampFromTime(t0), second.StartTimestamp())
		assert.Equal(t, 1, second.Exemplars().Len(), "exemplars belong to one interval")
		// An idle interval still reports the totals.
		third := histPoints(t, h.flush(t, 15*time.Second), names.MetricTimeToFirstToken)[llama]
		assert.Equal(t, uint64(2), third.Count())
		assert.Equal(t, 0, third.Exemplars().Len())
	})
	t.Run("delta", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.AggregationTemporality = TemporalityDelta })
		send(t, h, 0.1)
		first := histPoints(t, h.flush(t, 15*time.Second), names.MetricTimeToFirstToken)[llama]
		assert.Equal(t, uint64(1), first.Count())
		assert.Equal(t, pcommon.NewTimestampFromTime(t0), first.StartTimestamp())
		send(t, h, 0.2)
		md := h.flush(t, 15*time.Second)
		m := metricsNamed(md, names.MetricTimeToFirstToken)[0]
		assert.Equal(t, pmetric.AggregationTemporalityDelta, m.Histogram().AggregationTemporality())
		second := histPoints(t, md, names.MetricTimeToFirstToken)[llama]
		assert.Equal(t, uint64(1), second.Count())
		assert.InDelta(t, 0.2, second.Sum(), 1e-9)
		assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(15*time.Second)), second.StartTimestamp())
		assert.Equal(t, map[string]int64{llama: 1}, sumPoints(t, md, names.MetricRequests))
		// Idle interval: nothing to say, and the series is dropped.
		assert.Equal(t, 0, h.flush(t, 15*time.Second).ResourceMetrics().Len())
		assert.Equal(t, 0, h.c.store.Len())
	})
}

func TestMetricsExpiration(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MetricsExpiration = time.Minute })
	td, spans := batch(vllmResource)
	h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10))
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	assert.Equal(t, 1, h.flush(t, 30*time.Second).ResourceMetrics().Len())
	assert.Equal(t, 1, h.flush(t, 29*time.Second).ResourceMetrics().Len())
	assert.Equal(t, 1, h.c.store.Len())
	h.flush(t, 2*time.Second) // 61 s idle: expired after this flush
	assert.Equal(t, 0, h.c.store.Len())
	assert.Equal(t, 0, h.flush(t, time.Second).ResourceMetrics().Len())
}

func TestCardinalityLimit(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AggregationCardinalityLimit = 3 })
	td, spans := batch(vllmResource)
	for i := range 10 {
		h.addSpan(spans, "llm_request", time.Second, canonical(string(rune('a'+i)), 0.1, 1, 0, 0.1, 0.5, 10, 10))
	}
	s2, steps := batch(map[string]any{"service.name": "another-engine"})
	h.addSpan(steps, names.SpanEngineStep, 10*time.Millisecond, map[string]any{names.AttrStepScheduledToks: 4})
	s2.ResourceSpans().At(0).CopyTo(td.ResourceSpans().AppendEmpty())
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	assert.Equal(t, 4, h.c.store.Len(), "3 series and the overflow series")

	md := h.flush(t, time.Second)
	reqs := sumPoints(t, md, names.MetricRequests)
	assert.Equal(t, map[string]int64{
		"gen_ai.request.model=a;": 1, "gen_ai.request.model=b;": 1, "gen_ai.request.model=c;": 1,
		"otel.metric.overflow=true;": 7,
	}, reqs)
	overflowStep := histPoints(t, md, names.MetricStepDuration)["otel.metric.overflow=true;"]
	assert.Equal(t, uint64(1), overflowStep.Count())
	// The overflow series sits under an empty resource.
	last := md.ResourceMetrics().At(md.ResourceMetrics().Len() - 1)
	assert.Equal(t, 0, last.Resource().Attributes().Len())
	metadatatest.AssertEqualConnectorInferenceMetricsOverflowSpans(t, h.tel, []metricdata.DataPoint[int64]{{Value: 8}}, metricdatatest.IgnoreTimestamp())
}

func TestBadValues(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	h.addSpan(spans, "llm_request", time.Second, map[string]any{
		names.AttrTimeToFirstToken: "1.23s", // TGI style, not normalised
		names.AttrE2E:              math.NaN(),
		names.AttrTimeInQueue:      -0.5,
		names.AttrTimeInDecode:     math.Inf(1),
		names.AttrInputTokens:      1.5,
		names.AttrOutputTokens:     -3,
		names.AttrRequestModel:     42,
		names.AttrITLGaps:          []any{0.01, "x", -1.0, 0.02},
	})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	// Still a request: counted, with the span's own duration, nothing invented.
	assert.Equal(t, map[string]int64{"": 1}, sumPoints(t, md, names.MetricRequests))
	assert.InDelta(t, 1.0, histPoints(t, md, names.MetricRequestDuration)[""].Sum(), 1e-9)
	assert.Empty(t, histPoints(t, md, names.MetricTimeToFirstToken))
	assert.Empty(t, histPoints(t, md, names.MetricQueueDuration))
	assert.Equal(t, uint64(2), histPoints(t, md, names.MetricInterTokenLatency)[""].Count())
	metadatatest.AssertEqualConnectorInferenceMetricsBadValues(t, h.tel, []metricdata.DataPoint[int64]{{Value: 9}}, metricdatatest.IgnoreTimestamp())
}

func TestDimensionsAndDisabledMetrics(t *testing.T) {
	none := "none"
	h := newHarness(t, func(c *Config) {
		c.Dimensions = []Dimension{{Name: "inferprof.lora.adapter", Default: &none}}
		c.Metrics = map[string]MetricConfig{names.MetricOtherDuration: {Enabled: false}}
	})
	td, spans := batch(vllmResource)
	a := canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10)
	a["inferprof.lora.adapter"] = "sql"
	h.addSpan(spans, "llm_request", time.Second, a)
	h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10))
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	assert.Equal(t, map[string]int64{
		llama + "inferprof.lora.adapter=sql;":  1,
		llama + "inferprof.lora.adapter=none;": 1,
	}, sumPoints(t, md, names.MetricRequests))
	assert.Empty(t, metricsNamed(md, names.MetricOtherDuration))
}

func TestExemplarsKeepLargest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Exemplars.MaxPerDataPoint = 2 })
	td, spans := batch(vllmResource)
	for _, ttft := range []float64{0.3, 0.1, 0.9, 0.2, 0.5} {
		h.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrTimeToFirstToken: ttft})
	}
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	dp := histPoints(t, h.flush(t, time.Second), names.MetricTimeToFirstToken)[""]
	require.Equal(t, 2, dp.Exemplars().Len())
	got := []float64{dp.Exemplars().At(0).DoubleValue(), dp.Exemplars().At(1).DoubleValue()}
	assert.ElementsMatch(t, []float64{0.9, 0.5}, got)

	off := newHarness(t, func(c *Config) { c.Exemplars.Enabled = false })
	td, spans = batch(vllmResource)
	off.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrTimeToFirstToken: 0.1})
	require.NoError(t, off.c.ConsumeTraces(t.Context(), td))
	assert.Equal(t, 0, histPoints(t, off.flush(t, time.Second), names.MetricTimeToFirstToken)[""].Exemplars().Len())
}

func TestResourceAttributeOrderDoesNotSplitSeries(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(map[string]any{"a": "1", "b": int64(2)})
	h.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrE2E: 1.0})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	td = ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("b", 2)
	rs.Resource().Attributes().PutStr("a", "1")
	h.addSpan(rs.ScopeSpans().AppendEmpty().Spans(), "llm_request", time.Second, map[string]any{names.AttrE2E: 1.0})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	assert.Equal(t, 1, h.c.store.Len())
	// A different value is a different resource.
	td, spans = batch(map[string]any{"a": "1", "b": int64(3)})
	h.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrE2E: 1.0})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	assert.Equal(t, 2, h.c.store.Len())
}

// TestFlushOnTicker drives the real Start/ticker path with a fake clock.
func TestFlushOnTicker(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	clock := clockwork.NewFakeClockAt(t0)
	ctx := clockwork.AddToContext(t.Context(), clock)
	cfg := createDefaultConfig().(*Config)
	f := NewFactory()
	c, err := f.CreateTracesToMetrics(ctx, metadatatest.NewSettings(componenttest.NewTelemetry()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	td, spans := batch(vllmResource)
	(&harness{}).addSpan(spans, "llm_request", time.Second, canonical("llama", 0.25, 1, 0, 0.25, 0.5, 10, 10))
	require.NoError(t, c.ConsumeTraces(ctx, td))
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	clock.Advance(cfg.MetricsFlushInterval)
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, c.Shutdown(ctx))
	// Shutdown flushes once more; the second call is a no-op.
	require.Len(t, sink.AllMetrics(), 2)
	require.NoError(t, c.Shutdown(ctx))
	dp := histPoints(t, sink.AllMetrics()[1], names.MetricTimeToFirstToken)[llama]
	assert.Equal(t, uint64(1), dp.Count())
}

func TestShutdownWithoutStart(t *testing.T) {
	c, err := NewFactory().CreateTracesToMetrics(t.Context(), metadatatest.NewSettings(componenttest.NewTelemetry()), createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(t.Context()))
	require.NoError(t, c.Shutdown(t.Context()))
}

func TestNextConsumerErrorIsLogged(t *testing.T) {
	h := newHarness(t, nil)
	h.c.next = consumertest.NewErr(assert.AnError)
	td, spans := batch(vllmResource)
	h.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrE2E: 1.0})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	h.c.flush(t.Context(), false) // must not panic; the error goes to the log
	assert.Equal(t, 1, h.c.store.Len())
}

// TestMetadataMatchesSpecs keeps metadata.yaml (and so documentation.md) and
// what the connector emits in step.
func TestMetadataMatchesSpecs(t *testing.T) {
	raw, err := os.ReadFile("metadata.yaml")
	require.NoError(t, err)
	var md struct {
		Metrics map[string]struct {
			Description string `yaml:"description"`
			Unit        string `yaml:"unit"`
			Histogram   *struct {
				Bounds []float64 `yaml:"bucket_boundaries"`
			} `yaml:"histogram"`
			Sum   *struct{} `yaml:"sum"`
			Gauge *struct{} `yaml:"gauge"`
		} `yaml:"metrics"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &md))
	require.Len(t, md.Metrics, len(aggregate.Specs))
	bounds := map[string][]float64{
		names.MetricTimeToFirstToken: aggregate.BoundsTTFT, names.MetricTimePerOutputToken: aggregate.BoundsTPOT,
		names.MetricRequestDuration: aggregate.BoundsRequestDuration, names.MetricQueueDuration: aggregate.BoundsPhase,
		names.MetricPrefillDuration: aggregate.BoundsPhase, names.MetricDecodeDuration: aggregate.BoundsPhase,
		names.MetricOtherDuration: aggregate.BoundsPhase, names.MetricTokenUsage: aggregate.BoundsTokens,
		names.MetricInterTokenLatency: aggregate.BoundsITL, names.MetricStepDuration: aggregate.BoundsStepDuration,
		names.MetricStepBatchSize: aggregate.BoundsBatchSize, names.MetricStepTokens: aggregate.BoundsStepTokens,
		names.MetricCPUOverheadShare: aggregate.BoundsShare,
		names.MetricAgentRunDuration: aggregate.BoundsAgentRun, names.MetricAgentPartDuration: aggregate.BoundsAgentRun,
		names.MetricAgentTurns: aggregate.BoundsTurns,
	}
	for _, s := range aggregate.Specs {
		m, ok := md.Metrics[s.Name]
		require.True(t, ok, s.Name)
		assert.Equal(t, m.Description, s.Description, s.Name)
		assert.Equal(t, m.Unit, s.Unit, s.Name)
		if m.Histogram != nil {
			assert.Equal(t, m.Histogram.Bounds, bounds[s.Name], s.Name)
		} else {
			assert.True(t, m.Sum != nil || m.Gauge != nil, s.Name)
		}
	}
}

// TestConcurrentConsumeAndFlush: batches from several receivers' goroutines
// and flushes interleave; cumulative totals lose nothing.
func TestConcurrentConsumeAndFlush(t *testing.T) {
	h := newHarness(t, nil)
	const workers, batches, spans = 4, 50, 20
	td := vllmBatch(spans, true)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range batches {
				assert.NoError(t, h.c.ConsumeTraces(t.Context(), td))
			}
		})
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-done:
				return
			default:
				h.c.flush(t.Context(), false)
			}
		}
	}()
	wg.Wait()
	close(done)
	<-flushed
	md := h.flush(t, time.Second)
	total := int64(0)
	for _, v := range sumPoints(t, md, names.MetricRequests) {
		total += v
	}
	assert.Equal(t, int64(workers*batches*spans), total)
}

// TestRequestKeys: every key parseRequest reads has its own slot in the
// table, without the map fallback.
func TestRequestKeys(t *testing.T) {
	require.True(t, requestKeys.Perfect())
	require.Equal(t, keyE2E, requestKeys.Index(names.AttrE2E))
	require.Equal(t, keyCPUOverhead, requestKeys.Index(names.AttrCPUOverhead))
	require.Equal(t, -1, requestKeys.Index("gen_ai.request.top_p"))
}
