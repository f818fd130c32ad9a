// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"encoding/json"
	"math"

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

// vllmBasic: a chat request that ran to its stop token.
func vllmBasic() ptrace.Traces {
	b := vllmExport()
	b.doTracing(vllmStats{
		arrival: t0, queued: 81234.010, scheduled: 81234.060, firstToken: 81234.210, lastToken: 81235.910,
		firstTokenLatency: 0.25, generated: 128,
	}, vllmRequest{
		traceID: "5b8efff798038103d269b633813fc60c", spanID: "eee19b7ec3c1b174", externalReqID: "chatcmpl-7f3a9c",
		promptLen: 512, finish: "stop", topP: 0.9, temp: 0.7, maxTokens: 256, n: 1,
		iterationStamp: t0 + 2.0, endDelay: 0.0005,
	})
	return b.traces()
}

var (
	_ = register("vllm_basic", vllmBasic)
	_ = register("vllm_temperature0", func() ptrace.Traces {
		// temperature 0 is falsy, so do_tracing leaves it out.
		b := vllmExport()
		b.doTracing(vllmStats{
			arrival: t0, queued: 90000.000, scheduled: 90000.020, firstToken: 90000.120, lastToken: 90000.920,
			firstTokenLatency: 0.13, generated: 64,
		}, vllmRequest{
			traceID: "5b8efff798038103d269b633813fc60c", spanID: "eee19b7ec3c1b175", externalReqID: "cmpl-1b2c3d",
			promptLen: 20, finish: "length", topP: 1.0, maxTokens: 64, n: 1, iterationStamp: t0 + 0.94, endDelay: 0.0004,
		})
		return b.traces()
	})
	_ = register("vllm_one_token", func() ptrace.Traces {
		// One output token: first_token_ts == last_token_ts, decode 0.
		b := vllmExport()
		b.doTracing(vllmStats{
			arrival: t0, queued: 90100.000, scheduled: 90100.010, firstToken: 90100.090, lastToken: 90100.090,
			firstTokenLatency: 0.1, generated: 1,
		}, vllmRequest{
			traceID: "5b8efff798038103d269b633813fc60c", spanID: "eee19b7ec3c1b176", externalReqID: "chatcmpl-0ne",
			promptLen: 300, finish: "length", maxTokens: 1, n: 1, iterationStamp: t0 + 0.11, endDelay: 0.0003,
		})
		return b.traces()
	})
	_ = register("vllm_aborted", func() ptrace.Traces {
		// Two requests aborted before their first token. The first never
		// left the queue: scheduled_ts stays 0.0, so queue is 0 − queued_ts.
		// The second was scheduled: prefill and inference are
		// 0 − scheduled_ts. TTFT stays 0.0 and decode is 0 − 0.
		b := vllmExport()
		b.doTracing(vllmStats{arrival: t0, queued: 81240.500}, vllmRequest{
			traceID: "5b8efff798038103d269b633813fc60c", spanID: "eee19b7ec3c1b177", externalReqID: "chatcmpl-waiting",
			promptLen: 512, finish: "abort", topP: 0.9, temp: 0.7, maxTokens: 256, n: 1, iterationStamp: t0 + 0.5,
		})
		b.doTracing(vllmStats{arrival: t0 + 1, queued: 81241.500, scheduled: 81241.900}, vllmRequest{
			traceID: "6c9f0008a9149214e37ac744924fd71d", spanID: "eee19b7ec3c1b178", externalReqID: "chatcmpl-prefill",
			promptLen: 8000, finish: "abort", temp: 0.7, maxTokens: 256, n: 1, iterationStamp: t0 + 1.6,
		})
		return b.traces()
	})
	_ = register("vllm_error", func() ptrace.Traces {
		// A request ended by an engine error passed to instrument_manual
		// (span status Error and an exception event), and one whose finish
		// reason is "error" with the status left unset.
		b := vllmExport()
		b.doTracing(vllmStats{
			arrival: t0, queued: 81250.000, scheduled: 81250.030, firstToken: 81250.230, lastToken: 81250.630,
			firstTokenLatency: 0.24, generated: 20,
		}, vllmRequest{
			traceID: "5b8efff798038103d269b633813fc60c", spanID: "eee19b7ec3c1b179", externalReqID: "chatcmpl-dead",
			promptLen: 512, finish: "abort", maxTokens: 256, n: 1, iterationStamp: t0 + 0.7,
			errorType: "vllm.v1.engine.exceptions.EngineDeadError", error: "EngineCore encountered an issue. See stack trace (above) for the root cause.",
		})
		b.doTracing(vllmStats{
			arrival: t0 + 1, queued: 81251.000, scheduled: 81251.010, firstToken: 81251.110, lastToken: 81251.410,
			firstTokenLatency: 0.12, generated: 16,
		}, vllmRequest{
			traceID: "6c9f0008a9149214e37ac744924fd71d", spanID: "eee19b7ec3c1b17a", externalReqID: "cmpl-err",
			promptLen: 64, finish: "error", maxTokens: 32, n: 1, iterationStamp: t0 + 1.43,
		})
		return b.traces()
	})

	// Bad input, on purpose: vllm_basic with values no vLLM writes, for the
	// anomaly paths. Not engine output; listed as such in the README.
	_ = register("vllm_bad_values", func() ptrace.Traces {
		td := vllmBasic()
		a := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
		a.Remove("gen_ai.latency.e2e")
		a.PutStr("gen_ai.latency.time_in_model_decode", "1.7")
		a.PutDouble("gen_ai.latency.time_in_model_prefill", nan())
		a.PutDouble("gen_ai.latency.time_in_queue", -0.05)
		a.PutStr("gen_ai.usage.prompt_tokens", "512")
		return td
	})
	_ = register("vllm_phases_exceed_e2e", func() ptrace.Traces {
		td := vllmBasic()
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutDouble("gen_ai.latency.e2e", 1.5)
		return td
	})
	_ = register("vllm_content", func() ptrace.Traces {
		// Prompt and completion content as instrumentation libraries (not
		// vLLM) put it on spans, plus a LoRA name and a served model.
		td := vllmBasic()
		s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		put(s.Attributes(),
			"gen_ai.request.model", "Qwen/Qwen3-8B", "lora_name", "sql-adapter",
			"gen_ai.prompt", "secret prompt", "gen_ai.prompt.0.content", "secret prompt",
			"gen_ai.completion.0.content", "secret completion", "gen_ai.input.messages", `[{"role":"user","content":"secret"}]`,
			"gen_ai.output.messages", `[{"role":"assistant","content":"secret"}]`, "gen_ai.system_instructions", "be secret",
			"llm.prompts", "secret", "llm.completions", "secret")
		event(s, "gen_ai.user.message", ns(t0+0.01), "content", "secret prompt")
		event(s, "gen_ai.choice", ns(t0+1.9), "message", "secret completion")
		event(s, "token_scheduled", ns(t0+0.06), "gen_ai.prompt", "secret prompt", "step", 1)
		return td
	})
)

// vLLM's journey-tracing branch (inference-sim/vllm @f6ec81c7, built on
// v0.15.1; the same design as vllm-project/vllm JOURNEY_TRACING.md @995ffad5,
// whose PRs were closed unmerged). The API server exports an "llm_request"
// span (scope vllm.api, entrypoints/openai/engine/serving.py) with api.*
// events and no latency attributes; the engine core process exports
// "llm_core" (scope vllm.scheduler, v1/core/sched/scheduler.py
// _create_core_span) as its child, with journey.* events stamped
// time.time_ns(). do_tracing is disabled on that branch.

const (
	journeyTrace  = "7d0a1119ba25a325f48bd855a3608e2e"
	journeyAPI    = "a1a1a1a1a1a1a1a1"
	journeyCoreID = "c2c2c2c2c2c2c2c2"
)

var (
	_ = register("vllm_journey_api", func() ptrace.Traces {
		b := newBatch("vllm.api", "service.name", "vllm-server", "telemetry.sdk.language", "python")
		s := b.span("llm_request", ptrace.SpanKindServer, journeyTrace, journeyAPI, "", ns(t0), ns(t0+2.0))
		put(s.Attributes(), "gen_ai.request.id", "chatcmpl-journey1", "http.route", "/v1/chat/completions",
			"gen_ai.response.model", "meta-llama/Llama-3.2-1B-Instruct", "gen_ai.usage.prompt_tokens", 512,
			"gen_ai.request.temperature", 0.7, "gen_ai.request.max_tokens", 256, "gen_ai.request.n", 1,
			"gen_ai.usage.completion_tokens", 128)
		event(s, "api.ARRIVED", ns(t0), "event.ts.monotonic", 5000.0)
		event(s, "api.HANDOFF_TO_CORE", ns(t0+0.003), "event.ts.monotonic", 5000.003)
		event(s, "api.FIRST_RESPONSE_FROM_CORE", ns(t0+0.252), "event.ts.monotonic", 5000.252)
		event(s, "api.DEPARTED", ns(t0+2.0), "event.ts.monotonic", 5002.0)
		return b.traces()
	})
	_ = register("vllm_journey_core", func() ptrace.Traces {
		b := newBatch("vllm.scheduler", "service.name", "vllm-server", "telemetry.sdk.language", "python")
		s := b.span("llm_core", ptrace.SpanKindInternal, journeyTrace, journeyCoreID, journeyAPI, ns(t0+0.004), ns(t0+1.951))
		put(s.Attributes(), "gen_ai.request.id", "chatcmpl-journey1-0")
		step := func(name string, ts float64, stepNo int, phase string, prefillDone, decodeDone int, extra ...any) {
			kv := append([]any{"event.type", name, "ts.monotonic", 5000 + ts, "scheduler.step", stepNo, "phase", phase,
				"prefill.done_tokens", prefillDone, "prefill.total_tokens", 512, "decode.done_tokens", decodeDone,
				"decode.max_tokens", 256, "num_preemptions", 0}, extra...)
			event(s, "journey."+name, ns(t0+ts), kv...)
		}
		step("QUEUED", 0.004, 0, "WAITING", 0, 0)
		step("SCHEDULED", 0.054, 3, "PREFILL", 0, 0, "schedule.kind", "FIRST")
		step("FIRST_TOKEN", 0.204, 5, "DECODE", 512, 1)
		step("FINISHED", 1.95, 132, "DECODE", 512, 128, "finish.status", "stopped")
		return b.traces()
	})
)

func nan() float64 { return math.NaN() }
