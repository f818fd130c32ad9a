// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/internal/goldentest"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadatatest"
)

// Each engine's figures checked by hand against the numbers its fixture
// generator (fixtures_*_test.go) fed the engine's own arithmetic.

func TestTensorRTLLM(t *testing.T) {
	spans, tel := runByID(t, goldenConfig(), "trtllm", "trtllm_handler", "trtllm_cancelled")
	s := spans["3"] // an integer gen_ai.request.id
	assert.Equal(t, "tensorrt_llm", str(t, s, names.AttrProviderName))
	assert.InDelta(t, 0.3, dbl(t, s, names.AttrTimeToFirstToken), 1e-12)
	assert.InDelta(t, 1.5, dbl(t, s, names.AttrE2E), 1e-12)
	assert.InDelta(t, 0.02, dbl(t, s, names.AttrTimeInQueue), 1e-12)
	// No prefill or decode figure is a fact of TensorRT-LLM, not an anomaly.
	absent(t, s, names.AttrTimeInPrefill, names.AttrTimeInDecode, names.AttrTimePerOutputTok,
		names.AttrBottleneck, names.AttrAnomaly, names.AttrErrorType)
	assert.Equal(t, int64(50), integer(t, s, names.AttrOutputTokens))

	c := spans["5"]
	// -1 means "not measured": no anomaly, no value, no TTFT without a token.
	absent(t, c, names.AttrTimeToFirstToken, names.AttrE2E, names.AttrAnomaly)
	assert.InDelta(t, 0.8, dbl(t, c, names.AttrTimeInQueue), 1e-12)
	assert.Equal(t, "cancelled", str(t, c, names.AttrErrorType))
	_, err := tel.GetMetric("otelcol_processor_inference_anomalies")
	assert.Error(t, err)
	metadatatest.AssertEqualProcessorInferenceRequests(t, tel, []metricdata.DataPoint[int64]{
		{Value: 3, Attributes: attribute.NewSet(attribute.String("provider", "tensorrt_llm"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestTGI(t *testing.T) {
	h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
	for _, b := range []string{"tgi_infer", "tgi", "tgi_failed_infer", "tgi_failed"} {
		h.consume(t, readBatch(t, b))
	}
	require.NoError(t, h.tp.Shutdown(t.Context()))
	var gen, chat, comp, failed ptrace.Span
	infer := 0
	for _, td := range h.sink.AllTraces() {
		for _, s := range allSpans(td) {
			switch id := s.SpanID().String(); {
			case id == "eee19b7ec3c1b17d":
				gen = s
			case id == "eee19b7ec3c1b17e":
				chat = s
			case id == "eee19b7ec3c1b181":
				comp = s
			case id == "eee19b7ec3c1b182":
				failed = s
			case s.Name() == "generate" || s.Name() == "generate_stream":
				// Infer's spans of the same names pass untouched.
				_, ok := s.Attributes().Get(names.AttrProviderName)
				assert.False(t, ok, "Infer span %s", s.Name())
				infer++
			}
		}
	}
	assert.Equal(t, 3, infer)
	// total_time is validation + queue + inference + 0.3 ms in the generator.
	assert.InDelta(t, 0.0015+0.0335+1.1993+0.0003, dbl(t, gen, names.AttrE2E), 1e-9)
	assert.InDelta(t, 0.0335, dbl(t, gen, names.AttrTimeInQueue), 1e-9)
	assert.Equal(t, "customer-a", str(t, gen, names.AttrLoRAAdapter), "an adapter other than the served model")
	absent(t, chat, names.AttrLoRAAdapter) // adapter_id is the served model's name
	assert.Equal(t, "chat", str(t, chat, names.AttrOperationName))
	assert.Equal(t, "text_completion", str(t, comp, names.AttrOperationName))
	// A failed request: no timings, so e2e is the span and error.type says so.
	assert.Equal(t, "_OTHER", str(t, failed, names.AttrErrorType))
	assert.InDelta(t, 0.004, dbl(t, failed, names.AttrE2E), 1e-9)

	// Without a known served model nothing can be said about adapter_id.
	cfg := goldenConfig()
	cfg.Model.Default = ""
	spans, _ := run(t, cfg, "tgi")
	absent(t, spans["generate"], names.AttrLoRAAdapter, names.AttrRequestModel)
}

func TestSGLangDisaggregated(t *testing.T) {
	spans, _ := run(t, goldenConfig(), "sglang_pd_decode_root", "sglang_pd_prefill_stages",
		"sglang_pd_prefill_root", "sglang_pd_decode_stages")
	p := spans["prefill Req 5e6f7a8b"]
	assert.InDelta(t, 300.2-300.08, dbl(t, p, names.AttrTimeInQueue), 1e-9, "prefill_waiting")
	assert.InDelta(t, (300.62-300.02)-(300.2-300.08), dbl(t, p, names.AttrTimeInPrefill), 1e-9)
	absent(t, p, request.AttrDecodeQueue)
	d := spans["decode Req 5e6f7a8b"]
	assert.InDelta(t, 400.78-400.7, dbl(t, d, request.AttrDecodeQueue), 1e-9, "decode_waiting")
	absent(t, d, names.AttrTimeInQueue, names.AttrBottleneck)
	assert.InDelta(t, 400.81-400.02, dbl(t, d, names.AttrTimeInPrefill), 1e-9, "left as SGLang wrote it")
}

// TestSGLangAbortedBeforeFirstToken: a client abort while the request
// waits in the queue, as SGLang 0.5.23 traces it (gen_sglang_spans.py).
// The tokenizer's _handle_abort_req ends the root with no usage and no
// finish reason; the scheduler writes prefill_waiting only when the request
// is first scheduled, so there is no queue stage and no queue figure.
func TestSGLangAbortedBeforeFirstToken(t *testing.T) {
	spans, _ := run(t, goldenConfig(), "sglang_abort_stages", "sglang_abort_root")
	s := spans[" Req 9c8d7e6f"]
	assert.Equal(t, "abort", str(t, s, names.AttrErrorType))
	assert.InDelta(t, 200.9-200.0, dbl(t, s, names.AttrE2E), 1e-9)
	absent(t, s, names.AttrTimeToFirstToken, names.AttrTimeInPrefill, names.AttrTimeInDecode, names.AttrAnomaly,
		names.AttrTimeInQueue)
	assert.NotContains(t, spans, "queue")
	assert.NotContains(t, spans, "prefill")
	assert.NotContains(t, spans, "decode")
	// The scheduler's thread span, closed by TraceReqContext.__del__, passes as it came.
	th := spans["Scheduler [TP 0]  [PP 0] (host:1a2b3c4d | pid:777)"]
	assert.Equal(t, ptrace.StatusCodeError, th.Status().Code())
}

func TestVLLMJourney(t *testing.T) {
	spans, tel := run(t, goldenConfig(), "vllm_journey_core", "vllm_journey_api")
	api := spans["llm_request"]
	assert.InDelta(t, 0.252, dbl(t, api, names.AttrTimeToFirstToken), 1e-6, "api.FIRST_RESPONSE_FROM_CORE − api.ARRIVED")
	assert.InDelta(t, 2.0, dbl(t, api, names.AttrE2E), 1e-6)
	core := spans["llm_core"]
	assert.InDelta(t, 0.05, dbl(t, core, names.AttrTimeInQueue), 1e-6)
	// The phases are drawn from the journey events, under llm_core.
	for name, want := range map[string][2]float64{"queue": {0.004, 0.054}, "prefill": {0.054, 0.204}, "decode": {0.204, 1.95}} {
		p := spans[name]
		assert.Equal(t, core.SpanID(), p.ParentSpanID(), name)
		start, end := offset(p, api)
		assert.InDelta(t, want[0], start, 1e-6, name)
		assert.InDelta(t, want[1], end, 1e-6, name)
	}
	// One request: llm_core is its engine half, not a second request.
	metadatatest.AssertEqualProcessorInferenceRequests(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("provider", "vllm"))},
	}, metricdatatest.IgnoreTimestamp())
}

// TestOtherEngineSpansPassUntouched: SGLang's thread spans and every stage
// span (PD ones included), TensorRT-LLM's handler spans and TGI's Infer
// spans leave exactly as they came.
func TestOtherEngineSpansPassUntouched(t *testing.T) {
	for _, b := range []string{"sglang_stages_level3", "sglang_pd_prefill_stages", "sglang_pd_decode_stages",
		"sglang_abort_stages", "trtllm_handler", "tgi_infer", "tgi_failed_infer"} {
		t.Run(b, func(t *testing.T) {
			h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
			h.consume(t, readBatch(t, b))
			goldentest.Equal(t, readBatch(t, b), goldentest.Merge(h.output(t)...))
		})
	}
}

// TestAnomalyWarnings: the first anomaly of each reason is logged at warn,
// then at most once per interval, with a count of those held back.
func TestAnomalyWarnings(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	h := newHarness(t, goldenConfig(), set)
	for range 3 {
		h.consume(t, readBatch(t, "vllm_bad_values"))
	}
	byReason := map[string]int{}
	for _, e := range logs.FilterMessageSnippet("bad value").All() {
		byReason[e.ContextMap()["reason"].(string)]++
	}
	// vllm_bad_values has missing, wrong_type (twice), nan and negative.
	assert.Equal(t, map[string]int{"missing": 1, "wrong_type": 1, "nan": 1, "negative": 1}, byReason)
	first := logs.FilterField(zap.String("reason", "nan")).All()[0]
	assert.Equal(t, "gen_ai.latency.time_in_model_prefill", first.ContextMap()["attribute"])
	assert.Equal(t, "vllm", first.ContextMap()["provider"])

	h.now = h.now.Add(warnEvery)
	h.consume(t, readBatch(t, "vllm_bad_values"))
	again := logs.FilterField(zap.String("reason", "nan")).All()
	require.Len(t, again, 2, "once more after the interval")
	assert.Equal(t, int64(2), again[1].ContextMap()["similar_suppressed"], "the two held back")
	require.NoError(t, h.tp.Shutdown(t.Context()))
}

func allSpans(tds ...ptrace.Traces) []ptrace.Span {
	var out []ptrace.Span
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// isSynthetic: a phase span the processor made (not the engine's).
func isSynthetic(s ptrace.Span) bool {
	v, ok := s.Attributes().Get(names.AttrSynthetic)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}
