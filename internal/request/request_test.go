// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

func newSpan(name string, attrs map[string]any) ptrace.Span {
	s := ptrace.NewSpan()
	s.SetName(name)
	_ = s.Attributes().FromRaw(attrs)
	return s
}

func TestClassify(t *testing.T) {
	v1 := map[string]any{names.AttrTimeToFirstToken: 0.1, names.AttrE2E: 1.0, names.AttrTimeInPrefill: 0.05,
		names.AttrTimeInDecode: 0.8, srcInference: 0.85, names.AttrRequestID: "chatcmpl-1"}
	trt := map[string]any{names.AttrTimeToFirstToken: 0.1, names.AttrE2E: 1.0, names.AttrTimeInQueue: 0.01,
		names.AttrRequestID: int64(7)}
	optIn := map[string]any{}
	for k, v := range v1 {
		optIn[k] = v
	}
	optIn[names.AttrOperationName] = "chat"
	optIn[names.AttrRequestModel] = "tiny-llama"
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		event string
		want  Kind
	}{
		{"llm_request", v1, "", KindVLLM},
		{"llm_request", trt, "", KindTensorRTLLM},
		// TensorRT-LLM's -1 sentinels, string id: still no prefill figure.
		{"llm_request", map[string]any{names.AttrE2E: -1.0, srcTopK: int64(40)}, "", KindTensorRTLLM},
		{"llm_request", map[string]any{names.AttrE2E: 1.0, srcKVTransfer: 0.1}, "", KindTensorRTLLM},
		{"llm_request", map[string]any{names.AttrE2E: 1.0}, "gen_server.selected", KindTensorRTLLM},
		// vLLM V0 wrote no prefill/decode but time_in_scheduler.
		{"llm_request", map[string]any{names.AttrE2E: 1.0, names.AttrTimeToFirstToken: 0.1, srcScheduler: 0.01}, "", KindVLLM},
		// The journey branch's API span: api.* events, no latency.
		{"llm_request", map[string]any{names.AttrRequestID: "chatcmpl-1"}, "api.ARRIVED", KindVLLM},
		{"llm_core", nil, "journey.QUEUED", KindVLLMCore},
		// vLLM under OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental:
		// "{operation} {model}", the same figures, operation and model added.
		{"chat tiny-llama", optIn, "", KindVLLM},
		{"text_completion facebook/opt-125m", optIn, "", KindVLLM},
		// A model name that reads like another engine's span name.
		{"chat prefill_waiting", optIn, "", KindVLLM},
		// A GenAI client span of the same name carries no engine figures.
		{"chat tiny-llama", map[string]any{names.AttrOperationName: "chat", names.AttrRequestModel: "tiny-llama"}, "", KindNone},
		// Only vLLM's SERVER span: the same figures on an internal span are not a request.
		{"chat tiny-llama", optIn, "internal", KindNone},
		{"llm_core", nil, "", KindNone},
		// Nothing an engine writes: no catch-all.
		{"llm_request", nil, "", KindNone},
		{"llm_request", map[string]any{names.AttrE2E: 1.0, names.AttrTimeToFirstToken: 0.1}, "", KindNone},
		{"openai_chat", map[string]any{names.AttrE2E: 1.0, names.AttrTimeToFirstToken: 0.1}, "", KindNone},
		{" Req 1a2b3c4d", nil, "", KindSGLangRoot},
		{"Req 1a2b3c4d", nil, "", KindSGLangRoot},
		{"prefill Req 1a2b3c4d", nil, "", KindSGLangRoot},
		{"decode Req 1a2b", nil, "", KindSGLangRoot},
		{"my Req handler x", nil, "", KindNone},
		{"Request 1a2b", nil, "", KindNone},
		{"Scheduler [TP 0] (host:1a2b3c4d | pid:777)", nil, "", KindNone},
		{"Bootstrap Room 0x3ade68b1", nil, "", KindNone},
		{"prefill_waiting", nil, "", KindSGLangStage},
		{"decode_loop", nil, "", KindSGLangStage},
		{"api_server_dispatch", nil, "", KindSGLangStage},
		{"dpc_dispatch", nil, "", KindSGLangStage},
		{"generate", map[string]any{"total_time": "1.2s"}, "", KindTGI},
		{"chat_completions", map[string]any{"queue_time": "1ms"}, "", KindTGI},
		{"generate_stream", map[string]any{"parameters": "GenerateParameters { }"}, "", KindTGI},
		{"completions", map[string]any{codeNamespace: tgiRouterMod}, "", KindTGI},
		{"generate", map[string]any{codeNamespace: "text_generation_router::infer"}, "", KindNone}, // Infer's span
		{"generate", nil, "", KindNone},                                                            // a generic name without TGI's fields
		{names.SpanEngineStep, map[string]any{names.AttrStepIndex: 1}, "", KindNone},
		{"GET /health", nil, "", KindNone},
	} {
		s := newSpan(tc.name, tc.attrs)
		s.SetKind(ptrace.SpanKindServer) // what vLLM's instrument_manual writes
		switch tc.event {
		case "":
		case "internal":
			s.SetKind(ptrace.SpanKindInternal)
		default:
			s.Events().AppendEmpty().SetName(tc.event)
		}
		assert.Equalf(t, tc.want, Classify(s), "%q %v %q", tc.name, tc.attrs, tc.event)
	}
}

func TestSGLangRole(t *testing.T) {
	for name, want := range map[string]string{
		" Req 1a2b3c4d": RoleUnified, "Req 1a2b3c4d": RoleUnified, "prefill Req 1a2b3c4d": RolePrefill,
		"decode Req 1a2b3c4d": RoleDecode, "unknown Req 1a2b3c4d": RoleUnified,
	} {
		got, ok := SGLangRole(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"Req ", " Req ", "x Req y", "Req a b", "decode Req " + strings.Repeat("a", 65)} {
		_, ok := SGLangRole(name)
		assert.False(t, ok, name)
	}
}

func TestFailureOf(t *testing.T) {
	for in, want := range map[string]string{
		`["stop"]`: "", `["abort"]`: "abort", `["cancelled"]`: "cancelled", `["timeout"]`: "timeout",
		`["error"]`: "error", `["stop", "abort"]`: "abort", `["not_finished"]`: "", "abort": "abort",
		`["errors"]`: "", `["length"]`: "", `"`: "", ``: "",
	} {
		assert.Equal(t, want, failureOf(pcommon.NewValueStr(in)), in)
	}
	sl := pcommon.NewValueSlice()
	sl.Slice().AppendEmpty().SetStr("stop")
	sl.Slice().AppendEmpty().SetStr("timeout")
	assert.Equal(t, "timeout", failureOf(sl))
}

func TestTGIDurations(t *testing.T) {
	for in, want := range map[string]float64{
		"1.2345s": 1.2345, "12.5ms": 0.0125, "830µs": 0.00083, "830us": 0.00083, "100ns": 1e-7, "0ns": 0, " 2s ": 2,
	} {
		s := newSpan("generate", map[string]any{"total_time": in})
		r := Normalize(KindTGI, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
		assert.Empty(t, r.Anomalies, in)
		v, _ := s.Attributes().Get(names.AttrE2E)
		assert.InDelta(t, want, v.Double(), 1e-12, in)
	}
	for in, want := range map[string]string{"soon": "total_time:unparsable", "-1s": "total_time:negative"} {
		s := newSpan("generate", map[string]any{"total_time": in})
		r := Normalize(KindTGI, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
		assert.Equal(t, []string{want}, r.Anomalies, in)
		_, ok := s.Attributes().Get(names.AttrE2E)
		assert.False(t, ok)
	}
}

func TestTGIAdapter(t *testing.T) {
	assert.Equal(t, "customer-a", tgiAdapter(`GenerateParameters { adapter_id: Some("customer-a"), seed: None }`))
	assert.Empty(t, tgiAdapter(`GenerateParameters { adapter_id: None }`))
	assert.Empty(t, tgiAdapter(`adapter_id: Some("`))
	assert.Empty(t, tgiAdapter(`adapter_id: Some("")`))
}

func TestTokenCounts(t *testing.T) {
	for _, tc := range []struct {
		v       any
		want    int64
		anomaly string
	}{
		{int64(7), 7, ""},
		{7.0, 7, ""},
		{7.5, 0, "gen_ai.usage.completion_tokens:not_integer"},
		{int64(-1), 0, "gen_ai.usage.completion_tokens:negative"},
		{"7", 0, "gen_ai.usage.completion_tokens:wrong_type"},
	} {
		s := newSpan(" Req 1", map[string]any{names.AttrE2E: 1.0, "gen_ai.usage.completion_tokens": tc.v})
		r := Normalize(KindSGLangRoot, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
		v, ok := s.Attributes().Get(names.AttrOutputTokens)
		if tc.anomaly == "" {
			assert.True(t, ok)
			assert.Equal(t, tc.want, v.Int())
			assert.Empty(t, r.Anomalies)
		} else {
			assert.False(t, ok)
			assert.Equal(t, []string{tc.anomaly}, r.Anomalies)
		}
	}
	// A semconv name already on the span is read too.
	s := newSpan(" Req 1", map[string]any{names.AttrE2E: 1.0, names.AttrOutputTokens: int64(3)})
	Normalize(KindSGLangRoot, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
	v, _ := s.Attributes().Get(names.AttrOutputTokens)
	assert.Equal(t, int64(3), v.Int())
}

func TestSkewTolerance(t *testing.T) {
	// Phases 0.5 ms over e2e: clock skew, other = 0 and no anomaly.
	s := newSpan("llm_request", map[string]any{
		names.AttrTimeToFirstToken: 0.1, names.AttrE2E: 1.0, names.AttrTimeInQueue: 0.1,
		names.AttrTimeInPrefill: 0.2, names.AttrTimeInDecode: 0.7005,
		"gen_ai.usage.prompt_tokens": int64(1), "gen_ai.usage.completion_tokens": int64(2),
	})
	r := Normalize(KindVLLM, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
	assert.Empty(t, r.Anomalies)
	v, _ := s.Attributes().Get(names.AttrTimeInOther)
	assert.Zero(t, v.Double())
}

func TestProviderAndOperation(t *testing.T) {
	res := pcommon.NewResource()
	res.Attributes().PutStr(names.ResourceEngineName, "vllm-custom")
	s := newSpan("llm_request", map[string]any{names.AttrRequestID: "embd-1"})
	set := &Settings{OperationName: "x"}
	rf := ReadResource(res, set)
	Normalize(KindVLLM, s, &rf, set, Queue{}, nil)
	p, _ := s.Attributes().Get(names.AttrProviderName)
	assert.Equal(t, "vllm-custom", p.Str())
	op, _ := s.Attributes().Get(names.AttrOperationName)
	assert.Equal(t, "embeddings", op.Str())

	s = newSpan("llm_request", map[string]any{names.AttrOperationName: "chat", "gen_ai.system": "sys"})
	Normalize(KindVLLM, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
	p, _ = s.Attributes().Get(names.AttrProviderName)
	assert.Equal(t, "sys", p.Str())
	op, _ = s.Attributes().Get(names.AttrOperationName)
	assert.Equal(t, "chat", op.Str())
}

// TestLoRAOrder checks the LoRA adapter comes from the first configured key
// with a string value, span before resource, including keys that are also
// ones Normalize reads or writes (read after its writes).
func TestLoRAOrder(t *testing.T) {
	vllm := func(extra map[string]any) map[string]any {
		m := map[string]any{
			names.AttrTimeToFirstToken: 0.1, names.AttrE2E: 1.0, names.AttrTimeInQueue: 0.01,
			names.AttrTimeInPrefill: 0.05, names.AttrTimeInDecode: 0.8,
			srcPromptTokens: int64(10), srcCompletionTokens: int64(5),
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		keys  []string
		attrs map[string]any
		res   map[string]any
		want  string
	}{
		{"first key wins", []string{"a", "b"}, vllm(map[string]any{"a": "x", "b": "y"}), nil, "x"},
		{"later key when first absent", []string{"a", "b"}, vllm(map[string]any{"b": "y"}), nil, "y"},
		{"non-string skipped", []string{"a", "b"}, vllm(map[string]any{"a": int64(1), "b": "y"}), nil, "y"},
		{"empty string skipped", []string{"a", "b"}, vllm(map[string]any{"a": "", "b": "y"}), nil, "y"},
		{"span before resource", []string{"a", "b"}, vllm(map[string]any{"b": "y"}), map[string]any{"a": "r"}, "y"},
		{"resource", []string{"a"}, vllm(nil), map[string]any{"a": "r"}, "r"},
		{"none", []string{"a"}, vllm(nil), nil, ""},
		{"key written before LoRA", []string{names.AttrBottleneck}, vllm(nil), nil, "decode"},
		{"key read from the span", []string{names.AttrRequestID}, vllm(map[string]any{names.AttrRequestID: "cmpl-1"}), nil, "cmpl-1"},
		{"finish reasons key", []string{srcFinishReasons}, vllm(map[string]any{srcFinishReasons: "stop"}), nil, "stop"},
		{"many keys", []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}, vllm(map[string]any{"k9": "z"}), nil, "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSpan("llm_request", tc.attrs)
			res := pcommon.NewResource()
			_ = res.Attributes().FromRaw(tc.res)
			set := &Settings{OperationName: "x", LoRAAttributes: tc.keys}
			rf := ReadResource(res, set)
			Normalize(KindVLLM, s, &rf, set, Queue{}, nil)
			v, ok := s.Attributes().Get(names.AttrLoRAAdapter)
			if tc.want == "" {
				assert.False(t, ok)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tc.want, v.Str())
		})
	}
}

// TestSGLangAbortShape: SGLang 0.5.23 ends a root aborted in the waiting
// queue with no usage and no finish reason (_handle_abort_req); only that
// shape is an abort.
func TestSGLangAbortShape(t *testing.T) {
	for _, tc := range []struct {
		attrs map[string]any
		want  string
	}{
		{map[string]any{names.AttrE2E: 0.9}, "abort"},
		{map[string]any{names.AttrE2E: 0.9, "gen_ai.usage.prompt_tokens": int64(10)}, ""},
		{map[string]any{names.AttrE2E: 0.9, names.AttrInputTokens: int64(10)}, ""},
		{map[string]any{names.AttrE2E: 0.9, "gen_ai.response.finish_reasons": `["stop"]`}, ""},
		{map[string]any{names.AttrE2E: 0.9, "gen_ai.usage.prompt_tokens": int64(10), "gen_ai.response.finish_reasons": `["abort"]`}, "abort"},
	} {
		s := newSpan(" Req 1", tc.attrs)
		Normalize(KindSGLangRoot, s, &Resource{}, &Settings{OperationName: "x"}, Queue{}, nil)
		v, ok := s.Attributes().Get(names.AttrErrorType)
		assert.Equal(t, tc.want != "", ok, "%v", tc.attrs)
		if ok {
			assert.Equal(t, tc.want, v.Str(), "%v", tc.attrs)
		}
	}
}
