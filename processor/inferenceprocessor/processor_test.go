// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/goldentest"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadatatest"
)

// spansByName indexes every output span by name (last one wins).
func spansByName(tds ...ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range tds {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					s := sss.At(j).Spans().At(k)
					out[s.Name()] = s
				}
			}
		}
	}
	return out
}

func dbl(t *testing.T, s ptrace.Span, key string) float64 {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.Truef(t, ok, "%s missing", key)
	require.Equal(t, pcommon.ValueTypeDouble, v.Type(), key)
	return v.Double()
}

func str(t *testing.T, s ptrace.Span, key string) string {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.Truef(t, ok, "%s missing", key)
	return v.Str()
}

func integer(t *testing.T, s ptrace.Span, key string) int64 {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.Truef(t, ok, "%s missing", key)
	require.Equal(t, pcommon.ValueTypeInt, v.Type(), key)
	return v.Int()
}

func absent(t *testing.T, s ptrace.Span, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, ok := s.Attributes().Get(k)
		assert.Falsef(t, ok, "%s should be absent", k)
	}
}

func offset(s ptrace.Span, parent ptrace.Span) (float64, float64) {
	base := int64(parent.StartTimestamp())
	return float64(int64(s.StartTimestamp())-base) / 1e9, float64(int64(s.EndTimestamp())-base) / 1e9
}

func run(t *testing.T, cfg *Config, batches ...string) (map[string]ptrace.Span, *componenttest.Telemetry) {
	t.Helper()
	out, tel := runFixtures(t, cfg, batches...)
	return spansByName(out...), tel
}

// runFixtures runs fixture batches through the processor, shuts it down
// and returns what came out.
func runFixtures(t *testing.T, cfg *Config, batches ...string) ([]ptrace.Traces, *componenttest.Telemetry) {
	t.Helper()
	tds := make([]ptrace.Traces, len(batches))
	for i, b := range batches {
		tds[i] = readBatch(t, b)
	}
	return runBatches(t, cfg, tds...)
}

func runBatches(t *testing.T, cfg *Config, tds ...ptrace.Traces) ([]ptrace.Traces, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	h := newHarness(t, cfg, metadatatest.NewSettings(tel))
	for _, td := range tds {
		h.consume(t, td)
	}
	require.NoError(t, h.tp.Shutdown(t.Context()))
	return h.sink.AllTraces(), tel
}

func TestVLLMCanonical(t *testing.T) {
	spans, tel := run(t, goldenConfig(), "vllm_basic")
	s := spans["llm_request"]
	assert.InDelta(t, 0.25, dbl(t, s, names.AttrTimeToFirstToken), 1e-12)
	assert.InDelta(t, 2.0, dbl(t, s, names.AttrE2E), 1e-12)
	assert.InDelta(t, 1.7/127, dbl(t, s, names.AttrTimePerOutputTok), 1e-12)
	assert.InDelta(t, 2.0-0.05-0.15-1.7, dbl(t, s, names.AttrTimeInOther), 1e-9)
	assert.Equal(t, "decode", str(t, s, names.AttrBottleneck))
	assert.Equal(t, int64(512), integer(t, s, names.AttrInputTokens))
	assert.Equal(t, int64(128), integer(t, s, names.AttrOutputTokens))
	assert.Equal(t, "vllm", str(t, s, names.AttrProviderName))
	assert.Equal(t, "chat", str(t, s, names.AttrOperationName)) // chatcmpl- request id
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", str(t, s, names.AttrRequestModel))
	absent(t, s, names.AttrAnomaly, names.AttrErrorType)

	// The waterfall: queue [0.05, 0.10], prefill [0.10, 0.25], decode [0.25, 1.95].
	for _, tc := range []struct {
		name       string
		start, end float64
	}{{"queue", 0.05, 0.10}, {"prefill", 0.10, 0.25}, {"decode", 0.25, 1.95}} {
		ph, ok := spans[tc.name]
		require.True(t, ok, tc.name)
		assert.Equal(t, s.SpanID(), ph.ParentSpanID(), tc.name)
		assert.Equal(t, s.TraceID(), ph.TraceID(), tc.name)
		start, end := offset(ph, s)
		assert.InDelta(t, tc.start, start, 1e-9, tc.name)
		assert.InDelta(t, tc.end, end, 1e-9, tc.name)
		v, _ := ph.Attributes().Get(names.AttrSynthetic)
		assert.True(t, v.Bool())
	}

	metadatatest.AssertEqualProcessorInferenceRequests(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("provider", "vllm"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorInferencePhaseSpans(t, tel, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
}

func TestPhaseSpansOff(t *testing.T) {
	cfg := goldenConfig()
	cfg.PhaseSpans = false
	spans, _ := run(t, cfg, "vllm_basic")
	require.Len(t, spans, 1)
	assert.Contains(t, spans, "llm_request")
}

func TestModelResolution(t *testing.T) {
	// Span beats resource beats default.
	td := readBatch(t, "vllm_basic")
	rs := td.ResourceSpans().At(0)
	rs.Resource().Attributes().PutStr(names.ResourceModelName, "from-resource")
	spans, _ := runTraces(t, goldenConfig(), td)
	assert.Equal(t, "from-resource", str(t, spans["llm_request"], names.AttrRequestModel))
	// The served model answered: it is the response model of a span
	// without one, and a span's own response model is kept.
	assert.Equal(t, "from-resource", str(t, spans["llm_request"], "gen_ai.response.model"))
	td = readBatch(t, "vllm_basic")
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(names.ResourceModelName, "from-resource")
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("gen_ai.response.model", "answered")
	spans, _ = runTraces(t, goldenConfig(), td)
	assert.Equal(t, "answered", str(t, spans["llm_request"], "gen_ai.response.model"))
	assert.Equal(t, "answered", str(t, spans["llm_request"], names.AttrRequestModel))

	td = readBatch(t, "vllm_basic")
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(names.ResourceModelName, "from-resource")
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr(names.AttrRequestModel, "from-span")
	spans, _ = runTraces(t, goldenConfig(), td)
	assert.Equal(t, "from-span", str(t, spans["llm_request"], names.AttrRequestModel))

	cfg := goldenConfig()
	cfg.Model.Default = ""
	spans, _ = runTraces(t, cfg, readBatch(t, "vllm_basic"))
	absent(t, spans["llm_request"], names.AttrRequestModel)
	absent(t, spans["llm_request"], "gen_ai.response.model")
}

func runTraces(t *testing.T, cfg *Config, tds ...ptrace.Traces) (map[string]ptrace.Span, *componenttest.Telemetry) {
	t.Helper()
	out, tel := runBatches(t, cfg, tds...)
	return spansByName(out...), tel
}

// spansByID indexes request spans by gen_ai.request.id (string or int).
func spansByID(tds ...ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if v, ok := s.Attributes().Get(names.AttrRequestID); ok {
						out[v.AsString()] = s
					}
				}
			}
		}
	}
	return out
}

func runByID(t *testing.T, cfg *Config, batches ...string) (map[string]ptrace.Span, *componenttest.Telemetry) {
	t.Helper()
	out, tel := runFixtures(t, cfg, batches...)
	return spansByID(out...), tel
}

func TestEdgeCases(t *testing.T) {
	t.Run("one output token has no time per output token", func(t *testing.T) {
		spans, _ := run(t, goldenConfig(), "vllm_one_token")
		s := spans["llm_request"]
		assert.Equal(t, int64(1), integer(t, s, names.AttrOutputTokens))
		absent(t, s, names.AttrTimePerOutputTok, names.AttrAnomaly)
		assert.NotContains(t, spans, "decode") // zero-length decode gets no span
	})
	t.Run("aborted before the first token", func(t *testing.T) {
		spans, tel := runByID(t, goldenConfig(), "vllm_aborted")
		// vLLM's 0.0 first_token_ts makes TTFT 0, decode 0 and prefill and
		// inference 0 − scheduled_ts; none of that is a measurement.
		for _, id := range []string{"chatcmpl-waiting", "chatcmpl-prefill"} {
			s := spans[id]
			assert.Equal(t, "abort", str(t, s, names.AttrErrorType), id)
			absent(t, s, names.AttrTimeToFirstToken, names.AttrTimeInPrefill, names.AttrTimeInDecode,
				"gen_ai.latency.time_in_model_inference", names.AttrTimePerOutputTok, names.AttrBottleneck,
				names.AttrTimeInOther, names.AttrAnomaly)
		}
		// Never scheduled: queue was 0 − queued_ts, so unknown too.
		absent(t, spans["chatcmpl-waiting"], names.AttrTimeInQueue)
		// Scheduled, then aborted in prefill: its queue is real.
		s := spans["chatcmpl-prefill"]
		assert.InDelta(t, 81241.900-81241.500, dbl(t, s, names.AttrTimeInQueue), 1e-9)
		_, err := tel.GetMetric("otelcol_processor_inference_anomalies")
		assert.Error(t, err, "placeholders are not anomalies")
	})
	t.Run("error status and error finish reason", func(t *testing.T) {
		spans, _ := runByID(t, goldenConfig(), "vllm_error")
		assert.Equal(t, "vllm.v1.engine.exceptions.EngineDeadError", str(t, spans["chatcmpl-dead"], names.AttrErrorType))
		assert.Equal(t, "error", str(t, spans["cmpl-err"], names.AttrErrorType), "finish reason error, status unset")
	})
	t.Run("error status without exception event", func(t *testing.T) {
		td := readBatch(t, "vllm_basic")
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
		spans, _ := runTraces(t, goldenConfig(), td)
		assert.Equal(t, "_OTHER", str(t, spans["llm_request"], names.AttrErrorType))
	})
	t.Run("temperature 0 is omitted by vLLM and not an anomaly", func(t *testing.T) {
		spans, _ := run(t, goldenConfig(), "vllm_temperature0")
		s := spans["llm_request"]
		absent(t, s, "gen_ai.request.temperature", names.AttrAnomaly)
		assert.Equal(t, "text_completion", str(t, s, names.AttrOperationName)) // cmpl- request id
	})
}

func TestBadValues(t *testing.T) {
	spans, tel := run(t, goldenConfig(), "vllm_bad_values")
	s := spans["llm_request"]
	assert.Equal(t,
		"gen_ai.latency.e2e:missing,gen_ai.latency.time_in_model_decode:wrong_type,"+
			"gen_ai.latency.time_in_model_prefill:nan,gen_ai.latency.time_in_queue:negative,gen_ai.usage.prompt_tokens:wrong_type",
		str(t, s, names.AttrAnomaly))
	// Nothing invented: the bad figures and everything computed from them are absent.
	absent(t, s, names.AttrE2E, names.AttrTimeInQueue, names.AttrTimeInPrefill, names.AttrTimeInDecode,
		names.AttrTimePerOutputTok, names.AttrTimeInOther, names.AttrBottleneck, names.AttrInputTokens)
	// The good ones stay.
	assert.InDelta(t, 0.25, dbl(t, s, names.AttrTimeToFirstToken), 1e-12)
	assert.Equal(t, int64(128), integer(t, s, names.AttrOutputTokens))
	assert.NotContains(t, spans, "queue")

	metadatatest.AssertEqualProcessorInferenceAnomalies(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "missing"))},
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "wrong_type"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "nan"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "negative"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreValue())

	spans, _ = run(t, goldenConfig(), "vllm_phases_exceed_e2e")
	s = spans["llm_request"]
	assert.Equal(t, "phases_exceed_e2e", str(t, s, names.AttrAnomaly))
	absent(t, s, names.AttrTimeInOther)
}

// TestPrivacyFirst: with the privacy processor first, as in every shipped
// pipeline, no content reaches the output and the figures read from what
// is left are whole.
func TestPrivacyFirst(t *testing.T) {
	spans, _ := run(t, goldenConfig(), "vllm_content")
	s := spans["llm_request"]
	absent(t, s, "gen_ai.prompt", "gen_ai.prompt.0.content", "gen_ai.completion.0.content", "gen_ai.input.messages",
		"gen_ai.output.messages", "gen_ai.system_instructions", "llm.prompts", "llm.completions")
	require.Equal(t, 1, s.Events().Len())
	ev := s.Events().At(0)
	assert.Equal(t, "token_scheduled", ev.Name())
	_, ok := ev.Attributes().Get("gen_ai.prompt")
	assert.False(t, ok)
	assert.Equal(t, "Qwen/Qwen3-8B", str(t, s, names.AttrRequestModel))
	assert.Equal(t, "sql-adapter", str(t, s, names.AttrLoRAAdapter))
}

func TestSGLangJoin(t *testing.T) {
	// From the fixtures: prefill_waiting ran 100.022 → 100.322 (perf
	// seconds), SGLang's prefill 100.02 → 100.5 includes it, decode
	// 100.5 → 103.0 over 200 tokens, e2e 3.0; decode_waiting (0.05 s, the
	// unified gap after prefill) is not queue time.
	const queue, prefill, decode, e2e = 100.322 - 100.022, 100.5 - 100.02, 103.0 - 100.5, 103.0 - 100.0
	for _, order := range [][]string{{"sglang_root_level1", "sglang_stages_level1"}, {"sglang_stages_level1", "sglang_root_level1"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			spans, tel := run(t, goldenConfig(), order...)
			s := spans[" Req 1a2b3c4d"]
			assert.InDelta(t, queue, dbl(t, s, names.AttrTimeInQueue), 1e-9)
			assert.InDelta(t, prefill-queue, dbl(t, s, names.AttrTimeInPrefill), 1e-9)
			assert.InDelta(t, decode/199, dbl(t, s, names.AttrTimePerOutputTok), 1e-12)
			assert.InDelta(t, e2e-prefill-decode, dbl(t, s, names.AttrTimeInOther), 1e-9)
			assert.Equal(t, int64(512), integer(t, s, request.AttrCacheRead))
			assert.Equal(t, "sglang", str(t, s, names.AttrProviderName))
			assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", str(t, s, names.AttrRequestModel)) // gen_ai.response.model
			q := spans["queue"]
			start, end := offset(q, s)
			// The queue phase lands where SGLang's prefill_waiting stage was.
			assert.InDelta(t, 0.022, start, 1e-6)
			assert.InDelta(t, 0.322, end, 1e-6)
			// Stage and thread spans pass through untouched.
			assert.Equal(t, 0, spans["prefill_waiting"].Attributes().Len())
			assert.Equal(t, 0, spans["decode_waiting"].Attributes().Len())
			_, err := tel.GetMetric("otelcol_processor_inference_join_timeouts")
			require.Error(t, err, "no request span timed out")
		})
	}

	t.Run("root released without stages after the wait", func(t *testing.T) {
		tel := componenttest.NewTelemetry()
		t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
		h := newHarness(t, goldenConfig(), metadatatest.NewSettings(tel))
		h.consume(t, sglangRootOnly(t))
		assert.Equal(t, 0, h.sink.SpanCount(), "the root is held for its stages")
		metadatatest.AssertEqualProcessorInferenceJoinPending(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

		h.p.expire(t.Context(), h.now.Add(2*time.Second))
		assert.Equal(t, 0, h.sink.SpanCount(), "still within the 3 s wait")
		h.p.expire(t.Context(), h.now.Add(3*time.Second))
		spans := spansByName(h.sink.AllTraces()...)
		s := spans[" Req 1a2b3c4d"]
		absent(t, s, names.AttrTimeInQueue, names.AttrBottleneck)
		assert.InDelta(t, 100.5-100.02, dbl(t, s, names.AttrTimeInPrefill), 1e-9) // still includes the queue
		metadatatest.AssertEqualProcessorInferenceJoinTimeouts(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
		require.NoError(t, h.tp.Shutdown(t.Context()))
		assert.Equal(t, 3, h.sink.SpanCount(), "root plus prefill and decode, once")
	})

	t.Run("join off", func(t *testing.T) {
		cfg := goldenConfig()
		cfg.SGLangJoin.Wait = 0
		spans, _ := run(t, cfg, "sglang_root")
		absent(t, spans[" Req 1a2b3c4d"], names.AttrTimeInQueue)
		assert.Contains(t, spans, "decode")
	})

	t.Run("shutdown releases held spans", func(t *testing.T) {
		h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
		h.consume(t, sglangRootOnly(t))
		require.Equal(t, 0, h.sink.SpanCount())
		require.NoError(t, h.tp.Shutdown(t.Context()))
		assert.Positive(t, h.sink.SpanCount())
	})
}

func TestJoinMemoryCap(t *testing.T) {
	cfg := goldenConfig()
	cfg.SGLangJoin.MaxPending = 2
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	h := newHarness(t, cfg, metadatatest.NewSettings(tel))
	// Three request spans of three traces: the third evicts the first,
	// which is released downstream at once (not dropped).
	for i := byte(1); i <= 3; i++ {
		td := readBatch(t, "sglang_root")
		s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		s.SetTraceID(pcommon.TraceID{15: i})
		h.consume(t, td)
	}
	assert.Positive(t, h.sink.SpanCount())
	metadatatest.AssertEqualProcessorInferenceJoinEvictions(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, h.tp.Shutdown(t.Context()))
	roots := 0
	for _, td := range h.sink.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			spans := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
			for k := 0; k < spans.Len(); k++ {
				if spans.At(k).Name() == " Req 1a2b3c4d" {
					roots++
				}
			}
		}
	}
	assert.Equal(t, 3, roots, "every request span comes out exactly once")
}

// TestReleaseRefusedRetriedThenCounted: spans the join releases go on in a
// batch of their own; a refusal is retried on the next ticks and, after the
// third try, counted as refused and reported.
func TestReleaseRefusedCounted(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	next := &flakyConsumer{fail: 1}
	p, tp, err := newTraces(t.Context(), metadatatest.NewSettings(tel), goldenConfig(), next)
	require.NoError(t, err)
	now := time.Unix(1767225600, 0)
	p.now = func() time.Time { return now }
	require.NoError(t, tp.ConsumeTraces(t.Context(), sglangRootOnly(t)))
	p.expire(t.Context(), now.Add(time.Minute)) // released, refused: counted, not queued
	const spans = 3                             // the root and its prefill and decode phase spans
	metadatatest.AssertEqualProcessorInferenceReleaseFailures(t, tel, []metricdata.DataPoint[int64]{{Value: spans}}, metricdatatest.IgnoreTimestamp())
	p.expire(t.Context(), now.Add(time.Minute)) // nothing is offered again
	require.NoError(t, tp.Shutdown(t.Context()))
	assert.Equal(t, 0, next.sink.SpanCount())
	metadatatest.AssertEqualProcessorInferenceReleaseFailures(t, tel, []metricdata.DataPoint[int64]{{Value: spans}}, metricdatatest.IgnoreTimestamp())

	// A consumer that takes them gets the spans once.
	next = &flakyConsumer{}
	p, tp, err = newTraces(t.Context(), metadatatest.NewSettings(tel), goldenConfig(), next)
	require.NoError(t, err)
	p.now = func() time.Time { return now }
	require.NoError(t, tp.ConsumeTraces(t.Context(), sglangRootOnly(t)))
	p.expire(t.Context(), now.Add(time.Minute))
	require.NoError(t, tp.Shutdown(t.Context()))
	assert.Equal(t, 3, next.sink.SpanCount(), "root, prefill and decode, once")
}

// TestReleaseRefusedAtShutdown: what shutdown releases and the consumer
// refuses is counted and the error returned.
func TestReleaseRefusedAtShutdown(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	_, tp, err := newTraces(t.Context(), metadatatest.NewSettings(tel), goldenConfig(), consumertest.NewErr(errors.New("downstream full")))
	require.NoError(t, err)
	require.NoError(t, tp.ConsumeTraces(t.Context(), sglangRootOnly(t)))
	require.ErrorContains(t, tp.Shutdown(t.Context()), "downstream full")
	metadatatest.AssertEqualProcessorInferenceReleaseFailures(t, tel, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
}

// sglangRootOnly is the sglang_root batch with the root span alone, so
// holding it leaves nothing else to pass on.
func sglangRootOnly(tb testing.TB) ptrace.Traces {
	td := readBatch(tb, "sglang_root")
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool {
		return s.Name() != " Req 1a2b3c4d"
	})
	return td
}

// flakyConsumer refuses its first fail batches.
type flakyConsumer struct {
	mu   sync.Mutex
	fail int
	sink consumertest.TracesSink
}

func (c *flakyConsumer) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (c *flakyConsumer) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("queue is full")
	}
	return c.sink.ConsumeTraces(ctx, td)
}

// TestLifecycleWithTicker runs the real background ticker: a held span comes
// out on its own after the wait.
func TestLifecycleWithTicker(t *testing.T) {
	cfg := goldenConfig()
	cfg.SGLangJoin.Wait = 40 * time.Millisecond
	sink := new(consumertest.TracesSink)
	tp, err := NewFactory().CreateTraces(t.Context(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, tp.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, tp.ConsumeTraces(t.Context(), sglangRootOnly(t)))
	require.Eventually(t, func() bool { return sink.SpanCount() == 3 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, tp.Shutdown(t.Context()))
	require.NoError(t, tp.Shutdown(t.Context()), "shutdown is idempotent")
}

// TestTickerNeverSeesAHeldSpanHalfMoved holds bursts of SGLang roots while
// the ticker expires them every millisecond: under -race, a held batch read
// while hold still fills it is reported (seen under load before hold built
// the batch under the join's lock), and every span must still arrive.
func TestTickerNeverSeesAHeldSpanHalfMoved(t *testing.T) {
	cfg := goldenConfig()
	cfg.SGLangJoin.Wait = 4 * time.Millisecond // the ticker runs every 1 ms
	start := func() (processor.Traces, *consumertest.TracesSink) {
		sink := new(consumertest.TracesSink)
		tp, err := NewFactory().CreateTraces(t.Context(), processortest.NewNopSettings(metadata.Type), cfg, sink)
		require.NoError(t, err)
		require.NoError(t, tp.Start(t.Context(), componenttest.NewNopHost()))
		t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
		return tp, sink
	}
	// What one root becomes (the root and its phase spans) once released.
	one, oneSink := start()
	require.NoError(t, one.ConsumeTraces(t.Context(), sglangRootOnly(t)))
	require.Eventually(t, func() bool { return oneSink.SpanCount() > 0 }, 5*time.Second, time.Millisecond)
	per := oneSink.SpanCount()

	tp, sink := start()
	const batches = 200
	for range batches {
		require.NoError(t, tp.ConsumeTraces(t.Context(), sglangRootOnly(t)))
	}
	require.Eventually(t, func() bool { return sink.SpanCount() == per*batches }, 10*time.Second, 50*time.Millisecond)
}

func TestShutdownWithoutStart(t *testing.T) {
	tp, err := NewFactory().CreateTraces(t.Context(), processortest.NewNopSettings(metadata.Type), createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, tp.Shutdown(t.Context()))
}

func TestAlreadyProcessedIsLeftAlone(t *testing.T) {
	h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
	h.consume(t, readBatch(t, "vllm_basic"))
	first := goldentest.Merge(h.output(t)...)

	again := ptrace.NewTraces()
	for _, td := range h.sink.AllTraces() {
		td.ResourceSpans().MoveAndAppendTo(again.ResourceSpans())
	}
	h2 := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
	h2.consume(t, again)
	goldentest.Equal(t, first, goldentest.Merge(h2.output(t)...))
}
