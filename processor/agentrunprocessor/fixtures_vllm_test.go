// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"encoding/json"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The engine side of the agent fixtures: vLLM V1's request span, as the
// inference processor's fixtures_vllm_test.go builds it (copied: a package's
// tests cannot import another's).
//
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

// vllmStats mirrors RequestStateStats.
type vllmStats struct {
	arrival                                  float64 // time.time()
	queued, scheduled, firstToken, lastToken float64 // monotonic; 0.0 = never
	firstTokenLatency                        float64 // 0.0 until the first token
	generated                                int
}

type vllmRequest struct {
	traceID, spanID  string
	externalReqID    string
	promptLen        int
	finish           string // str(FinishReason)
	topP, temp       float64
	maxTokens, n     int
	iterationStamp   float64 // IterationStats.iteration_timestamp, time.time()
	endDelay         float64 // do_tracing runs this long after the iteration stamp
	errorType, error string  // instrument_manual(error=...): status and exception event
}

func vllmExport() *batch {
	return newBatch("vllm.v1.engine.output_processor",
		"telemetry.sdk.language", "python", "telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0",
		"vllm.instrumenting_module_name", "vllm.llm_engine", "vllm.process_id", "4242", "service.name", "vllm-server")
}

// doTracing follows do_tracing's arithmetic and attribute order.
func (b *batch) doTracing(st vllmStats, r vllmRequest) ptrace.Span {
	e2e := r.iterationStamp - st.arrival
	queued := st.scheduled - st.queued
	prefill := st.firstToken - st.scheduled
	decode := st.lastToken - st.firstToken
	inference := st.lastToken - st.scheduled
	reasons, _ := json.Marshal([]string{r.finish})
	s := b.span("llm_request", ptrace.SpanKindServer, r.traceID, r.spanID, "",
		ns(st.arrival), ns(r.iterationStamp+r.endDelay))
	put(s.Attributes(),
		"gen_ai.latency.time_to_first_token", st.firstTokenLatency,
		"gen_ai.latency.e2e", e2e,
		"gen_ai.latency.time_in_queue", queued,
		"gen_ai.usage.prompt_tokens", r.promptLen,
		"gen_ai.usage.completion_tokens", st.generated,
		"gen_ai.latency.time_in_model_prefill", prefill,
		"gen_ai.latency.time_in_model_decode", decode,
		"gen_ai.latency.time_in_model_inference", inference,
		"gen_ai.request.id", r.externalReqID,
		"gen_ai.response.finish_reasons", string(reasons))
	// Optional request parameters, only when truthy.
	if r.topP != 0 {
		put(s.Attributes(), "gen_ai.request.top_p", r.topP)
	}
	if r.maxTokens != 0 {
		put(s.Attributes(), "gen_ai.request.max_tokens", r.maxTokens)
	}
	if r.temp != 0 {
		put(s.Attributes(), "gen_ai.request.temperature", r.temp)
	}
	if r.n != 0 {
		put(s.Attributes(), "gen_ai.request.n", r.n)
	}
	if r.errorType != "" {
		// The Python SDK's record_exception then set_status(ERROR).
		event(s, "exception", ns(r.iterationStamp+r.endDelay),
			"exception.type", r.errorType, "exception.message", r.error,
			"exception.stacktrace", "Traceback (most recent call last):\n  ...\n"+r.errorType+": "+r.error,
			"exception.escaped", "False")
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage(r.errorType + ": " + r.error)
	}
	return s
}
