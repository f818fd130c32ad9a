// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package spanfixture

import (
	"encoding/json"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// vLLM V1, main branch.
//
// vllm/v1/engine/output_processor.py @d0782260, OutputProcessor.do_tracing:
// one SERVER span "llm_request" per finished request, started at
// arrival_time, ended when do_tracing runs, with the attributes in the
// order of its dict. The figures are differences of RequestStateStats
// timestamps (vllm/v1/metrics/stats.py @28ed1fb8): arrival_time is the
// frontend's wall clock, queued/scheduled/first/last_token_ts the engine
// core's monotonic clock, every one 0.0 until set. Finish reasons are
// FINISH_REASON_STRINGS (vllm/v1/engine/__init__.py): stop, length, abort,
// error, repetition. Resource attributes from vllm/tracing/otel.py
// @40eeb0c5 init_tracer.

// VLLMStats mirrors RequestStateStats.
type VLLMStats struct {
	Arrival                                  float64 // time.time()
	Queued, Scheduled, FirstToken, LastToken float64 // monotonic; 0.0 = never
	FirstTokenLatency                        float64 // 0.0 until the first token
	Generated                                int
}

// VLLMRequest is the rest of what do_tracing reads of a finished request.
type VLLMRequest struct {
	TraceID, SpanID  string
	ExternalReqID    string
	PromptLen        int
	Finish           string // str(FinishReason)
	TopP, Temp       float64
	MaxTokens, N     int
	IterationStamp   float64 // IterationStats.iteration_timestamp, time.time()
	EndDelay         float64 // do_tracing runs this long after the iteration stamp
	ErrorType, Error string  // instrument_manual(error=...): status and exception event
}

// VLLMExport starts a batch of vLLM's output processor, with init_tracer's
// resource.
func VLLMExport() *Batch {
	return NewBatch("vllm.v1.engine.output_processor",
		"telemetry.sdk.language", "python", "telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0",
		"vllm.instrumenting_module_name", "vllm.llm_engine", "vllm.process_id", "4242", "service.name", "vllm-server")
}

// DoTracing follows do_tracing's arithmetic and attribute order.
func (b *Batch) DoTracing(st VLLMStats, r VLLMRequest) ptrace.Span {
	e2e := r.IterationStamp - st.Arrival
	queued := st.Scheduled - st.Queued
	prefill := st.FirstToken - st.Scheduled
	decode := st.LastToken - st.FirstToken
	inference := st.LastToken - st.Scheduled
	reasons, _ := json.Marshal([]string{r.Finish})
	s := b.Span("llm_request", ptrace.SpanKindServer, r.TraceID, r.SpanID, "",
		NS(st.Arrival), NS(r.IterationStamp+r.EndDelay))
	Put(s.Attributes(),
		"gen_ai.latency.time_to_first_token", st.FirstTokenLatency,
		"gen_ai.latency.e2e", e2e,
		"gen_ai.latency.time_in_queue", queued,
		"gen_ai.usage.prompt_tokens", r.PromptLen,
		"gen_ai.usage.completion_tokens", st.Generated,
		"gen_ai.latency.time_in_model_prefill", prefill,
		"gen_ai.latency.time_in_model_decode", decode,
		"gen_ai.latency.time_in_model_inference", inference,
		"gen_ai.request.id", r.ExternalReqID,
		"gen_ai.response.finish_reasons", string(reasons))
	// Optional request parameters, only when truthy.
	if r.TopP != 0 {
		Put(s.Attributes(), "gen_ai.request.top_p", r.TopP)
	}
	if r.MaxTokens != 0 {
		Put(s.Attributes(), "gen_ai.request.max_tokens", r.MaxTokens)
	}
	if r.Temp != 0 {
		Put(s.Attributes(), "gen_ai.request.temperature", r.Temp)
	}
	if r.N != 0 {
		Put(s.Attributes(), "gen_ai.request.n", r.N)
	}
	if r.ErrorType != "" {
		// The Python SDK's record_exception then set_status(ERROR).
		Event(s, "exception", NS(r.IterationStamp+r.EndDelay),
			"exception.type", r.ErrorType, "exception.message", r.Error,
			"exception.stacktrace", "Traceback (most recent call last):\n  ...\n"+r.ErrorType+": "+r.Error,
			"exception.escaped", "False")
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage(r.ErrorType + ": " + r.Error)
	}
	return s
}
