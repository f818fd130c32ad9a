// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// Kind says what a span is to this processor.
type Kind int

const (
	// KindNone is any span the processor leaves alone (apart from privacy).
	KindNone Kind = iota
	// KindVLLM is a vLLM request span: the V1 output processor's llm_request
	// (or, under the GenAI semconv opt-in, "{operation} {model}"), V0's, or
	// the journey-tracing branch's API span.
	KindVLLM
	// KindTensorRTLLM is TensorRT-LLM's llm_request span.
	KindTensorRTLLM
	// KindSGLangRoot is SGLang's root "{role} Req {rid}" span.
	KindSGLangRoot
	// KindSGLangStage is an SGLang stage (slice) span such as prefill_waiting.
	KindSGLangStage
	// KindTGI is a TGI router handler span (generate, generate_stream, ...).
	KindTGI
	// KindVLLMCore is the journey-tracing branch's llm_core span: the
	// engine core's half of a vLLM request, with journey.* events.
	KindVLLMCore
)

// Provider returns the gen_ai.provider.name an engine kind implies.
func (k Kind) Provider() string {
	switch k {
	case KindVLLM, KindVLLMCore:
		return names.ProviderVLLM
	case KindTensorRTLLM:
		return names.ProviderTensorRTLLM
	case KindSGLangRoot, KindSGLangStage:
		return names.ProviderSGLang
	case KindTGI:
		return names.ProviderTGI
	}
	return ""
}

// Stage span names SGLang uses for queueing (req_time_stats.py):
// prefill_waiting is the queue before prefill (unified and PD-prefill);
// decode_waiting is the decode server's queue under PD disaggregation, and
// in unified mode the gap between prefill and the first decode batch.
const (
	StagePrefillWaiting = "prefill_waiting"
	StageDecodeWaiting  = "decode_waiting"
)

// sglangStages are SGLang's stage (slice) span names, all trace levels and
// both name sets (dispatch/dc_dispatch today, api_server_dispatch/
// dpc_dispatch in earlier releases).
var sglangStages = map[string]bool{
	"tokenize": true, "dispatch": true, "dc_dispatch": true, "api_server_dispatch": true, "dpc_dispatch": true,
	"request_process": true, StagePrefillWaiting: true, "prefill_forward": true, "chunked_prefill": true,
	"decode_forward": true, "decode_loop": true, "prefill_prepare": true, "prefill_bootstrap": true,
	"prefill_transfer_kv_cache": true, "decode_prepare": true, "decode_bootstrap": true, StageDecodeWaiting: true,
	"decode_transferred": true, "quick_finish": true, "fake_output": true, "mini_lb_launch": true, "wait_pd_finish": true,
}

// tgiSpans are TGI router handler span names, with the operation each serves.
var tgiSpans = map[string]string{
	"generate":         "text_completion",
	"generate_stream":  "text_completion",
	"completions":      "text_completion",
	"chat_completions": "chat",
}

// trtEvents are span events only TensorRT-LLM writes (llmapi/tracing.py
// SpanEvents, disaggregated serving).
var trtEvents = map[string]bool{
	"kv_cache_transfer_start": true, "kv_cache_transfer_end": true,
	"ctx_server.selected": true, "gen_server.selected": true,
}

// Classify says what kind of span this is, from what each engine really
// writes: the name where an engine fixes it, what the span carries where the
// name is the user's (vLLM's semconv opt-in). It never looks at the instrumentation scope, whose name changes
// between engine versions, and it has no catch-all: a span no engine's code
// would write is KindNone.
func Classify(span ptrace.Span) Kind {
	name := span.Name()
	switch name {
	case "llm_request":
		return classifyLLMRequest(span)
	case "llm_core":
		if hasEventPrefix(span, "journey.") {
			return KindVLLMCore
		}
		return KindNone
	}
	if span.Kind() == ptrace.SpanKindServer && hasVLLMFigures(span.Attributes()) {
		// vLLM's request span under OTEL_SEMCONV_STABILITY_OPT_IN=
		// gen_ai_latest_experimental is named "{operation} {model}" (e.g.
		// "chat tiny-llama") and carries the same figures plus
		// gen_ai.operation.name and gen_ai.request.model (vllm-project/vllm
		// vllm/tracing @2b10648 latest_gen_ai_semconv_attributes). The name
		// is the user's model, so the span is known by what it carries.
		return KindVLLM
	}
	if sglangStages[name] {
		return KindSGLangStage
	}
	if _, ok := tgiSpans[name]; ok {
		if isTGIRouter(span.Attributes()) {
			return KindTGI
		}
		return KindNone
	}
	if _, ok := SGLangRole(name); ok {
		return KindSGLangRoot
	}
	return KindNone
}

// classifyLLMRequest tells vLLM's llm_request from TensorRT-LLM's, which
// borrowed vLLM's span name and attribute names. vLLM V1 always writes the
// prefill, decode and inference figures (output_processor.py do_tracing);
// TensorRT-LLM never does, writes its request id as an integer, writes
// top_k, and in disaggregated serving the KV-transfer time and events.
func classifyLLMRequest(span ptrace.Span) Kind {
	attrs := span.Attributes()
	// The common case first, with Get's plain loop rather than a walk
	// with a callback per attribute.
	if _, ok := attrs.Get(names.AttrTimeInPrefill); ok {
		return KindVLLM
	}
	var v1, trt, v0, latency bool
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case names.AttrTimeInPrefill, names.AttrTimeInDecode, srcInference:
			v1 = true
			return false
		case names.AttrRequestID:
			trt = trt || v.Type() == pcommon.ValueTypeInt
		case srcKVTransfer, srcTopK:
			trt = true
		case srcScheduler, srcNumSequences:
			v0 = true
		case names.AttrE2E, names.AttrTimeToFirstToken:
			latency = true
		}
		return true
	})
	switch {
	case v1:
		return KindVLLM
	case trt || hasTRTEvent(span):
		return KindTensorRTLLM
	case v0 && latency:
		return KindVLLM
	case !latency && hasEventPrefix(span, "api."):
		// The journey branch's API span: figures are its api.* events.
		return KindVLLM
	}
	return KindNone
}

// hasVLLMFigures reports whether attrs hold a figure only vLLM V1's request
// span writes (output_processor.py do_tracing writes all three, always).
// TensorRT-LLM, which borrowed vLLM's names, writes none of them, and no
// GenAI client instrumentation writes gen_ai.latency.*.
func hasVLLMFigures(attrs pcommon.Map) bool {
	for _, k := range [...]string{names.AttrTimeInPrefill, names.AttrTimeInDecode, srcInference} {
		if _, ok := attrs.Get(k); ok {
			return true
		}
	}
	return false
}

func hasTRTEvent(span ptrace.Span) bool {
	evs := span.Events()
	for i := 0; i < evs.Len(); i++ {
		if trtEvents[evs.At(i).Name()] {
			return true
		}
	}
	return false
}

func hasEventPrefix(span ptrace.Span, prefix string) bool {
	evs := span.Events()
	for i := 0; i < evs.Len(); i++ {
		if strings.HasPrefix(evs.At(i).Name(), prefix) {
			return true
		}
	}
	return false
}

// isTGIRouter reports whether a span named like a TGI handler is TGI's
// router span rather than an internal Infer span of the same name: the
// router span declares the parameters and timing fields, and
// tracing-opentelemetry records the handler's module.
func isTGIRouter(attrs pcommon.Map) bool {
	found := false
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case tgiTotal, tgiQueue, tgiInference, tgiValidation, tgiPerToken, tgiParameters:
			found = true
		case codeNamespace:
			found = v.Type() == pcommon.ValueTypeStr && v.Str() == tgiRouterMod
		}
		return !found
	})
	return found
}

// SGLang roles, from the root span name.
const (
	RoleUnified = ""
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// SGLangRole parses SGLang's root span name. Today's trace.py names it
// f"{role} Req {rid[:8]}", role "" in unified mode (so the name starts with
// a space) or prefill/decode under PD disaggregation (disagg_mode_str also
// yields "unknown"); the first tracing module named it f"Req {rid[:8]}".
func SGLangRole(name string) (string, bool) {
	const req = "Req "
	var role, rid string
	switch {
	case strings.HasPrefix(name, req):
		rid = name[len(req):]
	default:
		i := strings.Index(name, " "+req)
		if i < 0 {
			return "", false
		}
		role, rid = name[:i], name[i+1+len(req):]
	}
	if rid == "" || len(rid) > 64 || strings.IndexByte(rid, ' ') >= 0 {
		return "", false
	}
	switch role {
	case RoleUnified, RolePrefill, RoleDecode:
		return role, true
	case "unknown", "null":
		return RoleUnified, true
	}
	return "", false
}
