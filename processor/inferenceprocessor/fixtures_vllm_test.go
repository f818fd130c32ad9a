// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"math"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// vLLM V1, main branch: OutputProcessor.do_tracing's llm_request spans
// (vllm/v1/engine/output_processor.py @d0782260), built by
// spanfixture.DoTracing, whose comment cites the engine code in full.

// vllmBasic: a chat request that ran to its stop token.
func vllmBasic() ptrace.Traces {
	b := spanfixture.VLLMExport()
	b.DoTracing(spanfixture.VLLMStats{
		Arrival: spanfixture.T0, Queued: 81234.010, Scheduled: 81234.060, FirstToken: 81234.210, LastToken: 81235.910,
		FirstTokenLatency: 0.25, Generated: 128,
	}, spanfixture.VLLMRequest{
		TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b174", ExternalReqID: "chatcmpl-7f3a9c",
		PromptLen: 512, Finish: "stop", TopP: 0.9, Temp: 0.7, MaxTokens: 256, N: 1,
		IterationStamp: spanfixture.T0 + 2.0, EndDelay: 0.0005,
	})
	return b.Traces()
}

var (
	_ = generators.Register("vllm_basic", vllmBasic)
	_ = generators.Register("vllm_temperature0", func() ptrace.Traces {
		// temperature 0 is falsy, so do_tracing leaves it out.
		b := spanfixture.VLLMExport()
		b.DoTracing(spanfixture.VLLMStats{
			Arrival: spanfixture.T0, Queued: 90000.000, Scheduled: 90000.020, FirstToken: 90000.120, LastToken: 90000.920,
			FirstTokenLatency: 0.13, Generated: 64,
		}, spanfixture.VLLMRequest{
			TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b175", ExternalReqID: "cmpl-1b2c3d",
			PromptLen: 20, Finish: "length", TopP: 1.0, MaxTokens: 64, N: 1, IterationStamp: spanfixture.T0 + 0.94, EndDelay: 0.0004,
		})
		return b.Traces()
	})
	_ = generators.Register("vllm_one_token", func() ptrace.Traces {
		// One output token: first_token_ts == last_token_ts, decode 0.
		b := spanfixture.VLLMExport()
		b.DoTracing(spanfixture.VLLMStats{
			Arrival: spanfixture.T0, Queued: 90100.000, Scheduled: 90100.010, FirstToken: 90100.090, LastToken: 90100.090,
			FirstTokenLatency: 0.1, Generated: 1,
		}, spanfixture.VLLMRequest{
			TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b176", ExternalReqID: "chatcmpl-0ne",
			PromptLen: 300, Finish: "length", MaxTokens: 1, N: 1, IterationStamp: spanfixture.T0 + 0.11, EndDelay: 0.0003,
		})
		return b.Traces()
	})
	_ = generators.Register("vllm_aborted", func() ptrace.Traces {
		// Two requests aborted before their first token. The first never
		// left the queue: scheduled_ts stays 0.0, so queue is 0 − queued_ts.
		// The second was scheduled: prefill and inference are
		// 0 − scheduled_ts. TTFT stays 0.0 and decode is 0 − 0.
		b := spanfixture.VLLMExport()
		b.DoTracing(spanfixture.VLLMStats{Arrival: spanfixture.T0, Queued: 81240.500}, spanfixture.VLLMRequest{
			TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b177", ExternalReqID: "chatcmpl-waiting",
			PromptLen: 512, Finish: "abort", TopP: 0.9, Temp: 0.7, MaxTokens: 256, N: 1, IterationStamp: spanfixture.T0 + 0.5,
		})
		b.DoTracing(spanfixture.VLLMStats{Arrival: spanfixture.T0 + 1, Queued: 81241.500, Scheduled: 81241.900}, spanfixture.VLLMRequest{
			TraceID: "6c9f0008a9149214e37ac744924fd71d", SpanID: "eee19b7ec3c1b178", ExternalReqID: "chatcmpl-prefill",
			PromptLen: 8000, Finish: "abort", Temp: 0.7, MaxTokens: 256, N: 1, IterationStamp: spanfixture.T0 + 1.6,
		})
		return b.Traces()
	})
	_ = generators.Register("vllm_error", func() ptrace.Traces {
		// A request ended by an engine error passed to instrument_manual
		// (span status Error and an exception event), and one whose finish
		// reason is "error" with the status left unset.
		b := spanfixture.VLLMExport()
		b.DoTracing(spanfixture.VLLMStats{
			Arrival: spanfixture.T0, Queued: 81250.000, Scheduled: 81250.030, FirstToken: 81250.230, LastToken: 81250.630,
			FirstTokenLatency: 0.24, Generated: 20,
		}, spanfixture.VLLMRequest{
			TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b179", ExternalReqID: "chatcmpl-dead",
			PromptLen: 512, Finish: "abort", MaxTokens: 256, N: 1, IterationStamp: spanfixture.T0 + 0.7,
			ErrorType: "vllm.v1.engine.exceptions.EngineDeadError", Error: "EngineCore encountered an issue. See stack trace (above) for the root cause.",
		})
		b.DoTracing(spanfixture.VLLMStats{
			Arrival: spanfixture.T0 + 1, Queued: 81251.000, Scheduled: 81251.010, FirstToken: 81251.110, LastToken: 81251.410,
			FirstTokenLatency: 0.12, Generated: 16,
		}, spanfixture.VLLMRequest{
			TraceID: "6c9f0008a9149214e37ac744924fd71d", SpanID: "eee19b7ec3c1b17a", ExternalReqID: "cmpl-err",
			PromptLen: 64, Finish: "error", MaxTokens: 32, N: 1, IterationStamp: spanfixture.T0 + 1.43,
		})
		return b.Traces()
	})

	// Bad input, on purpose: vllm_basic with values no vLLM writes, for the
	// anomaly paths. Not engine output; listed as such in the README.
	_ = generators.Register("vllm_bad_values", func() ptrace.Traces {
		td := vllmBasic()
		a := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
		a.Remove("gen_ai.latency.e2e")
		a.PutStr("gen_ai.latency.time_in_model_decode", "1.7")
		a.PutDouble("gen_ai.latency.time_in_model_prefill", nan())
		a.PutDouble("gen_ai.latency.time_in_queue", -0.05)
		a.PutStr("gen_ai.usage.prompt_tokens", "512")
		return td
	})
	_ = generators.Register("vllm_phases_exceed_e2e", func() ptrace.Traces {
		td := vllmBasic()
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutDouble("gen_ai.latency.e2e", 1.5)
		return td
	})
	_ = generators.Register("vllm_content", func() ptrace.Traces {
		// Prompt and completion content as instrumentation libraries (not
		// vLLM) put it on spans, plus a LoRA name and a served model.
		td := vllmBasic()
		s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		spanfixture.Put(s.Attributes(),
			"gen_ai.request.model", "Qwen/Qwen3-8B", "lora_name", "sql-adapter",
			"gen_ai.prompt", "secret prompt", "gen_ai.prompt.0.content", "secret prompt",
			"gen_ai.completion.0.content", "secret completion", "gen_ai.input.messages", `[{"role":"user","content":"secret"}]`,
			"gen_ai.output.messages", `[{"role":"assistant","content":"secret"}]`, "gen_ai.system_instructions", "be secret",
			"llm.prompts", "secret", "llm.completions", "secret")
		spanfixture.Event(s, "gen_ai.user.message", spanfixture.NS(spanfixture.T0+0.01), "content", "secret prompt")
		spanfixture.Event(s, "gen_ai.choice", spanfixture.NS(spanfixture.T0+1.9), "message", "secret completion")
		spanfixture.Event(s, "token_scheduled", spanfixture.NS(spanfixture.T0+0.06), "gen_ai.prompt", "secret prompt", "step", 1)
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
	_ = generators.Register("vllm_journey_api", func() ptrace.Traces {
		b := spanfixture.NewBatch("vllm.api", "service.name", "vllm-server", "telemetry.sdk.language", "python")
		s := b.Span("llm_request", ptrace.SpanKindServer, journeyTrace, journeyAPI, "", spanfixture.NS(spanfixture.T0), spanfixture.NS(spanfixture.T0+2.0))
		spanfixture.Put(s.Attributes(), "gen_ai.request.id", "chatcmpl-journey1", "http.route", "/v1/chat/completions",
			"gen_ai.response.model", "meta-llama/Llama-3.2-1B-Instruct", "gen_ai.usage.prompt_tokens", 512,
			"gen_ai.request.temperature", 0.7, "gen_ai.request.max_tokens", 256, "gen_ai.request.n", 1,
			"gen_ai.usage.completion_tokens", 128)
		spanfixture.Event(s, "api.ARRIVED", spanfixture.NS(spanfixture.T0), "event.ts.monotonic", 5000.0)
		spanfixture.Event(s, "api.HANDOFF_TO_CORE", spanfixture.NS(spanfixture.T0+0.003), "event.ts.monotonic", 5000.003)
		spanfixture.Event(s, "api.FIRST_RESPONSE_FROM_CORE", spanfixture.NS(spanfixture.T0+0.252), "event.ts.monotonic", 5000.252)
		spanfixture.Event(s, "api.DEPARTED", spanfixture.NS(spanfixture.T0+2.0), "event.ts.monotonic", 5002.0)
		return b.Traces()
	})
	_ = generators.Register("vllm_journey_core", func() ptrace.Traces {
		b := spanfixture.NewBatch("vllm.scheduler", "service.name", "vllm-server", "telemetry.sdk.language", "python")
		s := b.Span("llm_core", ptrace.SpanKindInternal, journeyTrace, journeyCoreID, journeyAPI, spanfixture.NS(spanfixture.T0+0.004), spanfixture.NS(spanfixture.T0+1.951))
		spanfixture.Put(s.Attributes(), "gen_ai.request.id", "chatcmpl-journey1-0")
		step := func(name string, ts float64, stepNo int, phase string, prefillDone, decodeDone int, extra ...any) {
			kv := append([]any{"event.type", name, "ts.monotonic", 5000 + ts, "scheduler.step", stepNo, "phase", phase,
				"prefill.done_tokens", prefillDone, "prefill.total_tokens", 512, "decode.done_tokens", decodeDone,
				"decode.max_tokens", 256, "num_preemptions", 0}, extra...)
			spanfixture.Event(s, "journey."+name, spanfixture.NS(spanfixture.T0+ts), kv...)
		}
		step("QUEUED", 0.004, 0, "WAITING", 0, 0)
		step("SCHEDULED", 0.054, 3, "PREFILL", 0, 0, "schedule.kind", "FIRST")
		step("FIRST_TOKEN", 0.204, 5, "DECODE", 512, 1)
		step("FINISHED", 1.95, 132, "DECODE", 512, 128, "finish.status", "stopped")
		return b.Traces()
	})
)

func nan() float64 { return math.NaN() }
