// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// TensorRT-LLM.
//
// tensorrt_llm/llmapi/tracing.py @0fb7f758 (SpanAttributes, SpanEvents,
// trace_span) and tensorrt_llm/executor/result.py do_tracing (added by
// NVIDIA/TensorRT-LLM#5897): a SERVER span "llm_request" whose TTFT, e2e
// and queue come from metrics_dict.get(..., -1), where the metrics dict
// (result.py @a678b91a _process_req_perf_metrics) keeps only figures above
// zero; the request id is GenerationResult.id, an int; no prefill, decode
// or inference figure. Finish reasons from result.py @a678b91a
// _handle_sequence: stop, length, timeout, cancelled, not_finished. The
// span starts at now − e2e. trace_span wraps the OpenAI handler in a SERVER
// span named after it, status OK or ERROR; the disaggregated server adds
// ctx_server.selected / gen_server.selected events there.

type trtRequest struct {
	traceID, spanID  string
	id               int
	ttft, e2e, queue float64 // -1 when missing
	prompt, output   int
	finish           string
	kvTransfer       float64 // 0: not disaggregated
	end              float64 // when do_tracing runs
}

func trtBatch() *spanfixture.Batch {
	return spanfixture.NewBatch("tensorrt_llm.llmapi", "service.name", "trtllm-serve", "telemetry.sdk.language", "python")
}

func trtDoTracing(b *spanfixture.Batch, r trtRequest) {
	reasons, _ := json.Marshal([]string{r.finish})
	s := b.Span("llm_request", ptrace.SpanKindServer, r.traceID, r.spanID, "", spanfixture.NS(r.end-r.e2e), spanfixture.NS(r.end))
	spanfixture.Put(s.Attributes(),
		"gen_ai.request.temperature", 0.8, "gen_ai.request.top_p", 0.95, "gen_ai.request.top_k", 40,
		"gen_ai.request.max_tokens", 512, "gen_ai.request.n", 1,
		"gen_ai.latency.time_to_first_token", r.ttft, "gen_ai.latency.e2e", r.e2e, "gen_ai.request.id", r.id,
		"gen_ai.latency.time_in_queue", r.queue,
		"gen_ai.usage.prompt_tokens", r.prompt, "gen_ai.usage.completion_tokens", r.output,
		"gen_ai.response.finish_reasons", string(reasons))
	if r.kvTransfer != 0 {
		spanfixture.Put(s.Attributes(), "gen_ai.latency.kv_cache_transfer_time", r.kvTransfer)
	}
}

var (
	_ = generators.Register("trtllm", func() ptrace.Traces {
		b := trtBatch()
		trtDoTracing(b, trtRequest{traceID: "5b8efff798038103d269b633813fc60c", spanID: "eee19b7ec3c1b17c", id: 3,
			ttft: 0.3, e2e: 1.5, queue: 0.02, prompt: 100, output: 50, finish: "length", end: spanfixture.T0 + 1.5})
		trtDoTracing(b, trtRequest{traceID: "8e1b2223cb36b436059ce966b4719f3f", spanID: "eee19b7ec3c1b17f", id: 4,
			ttft: 0.45, e2e: 2.1, queue: 0.03, prompt: 900, output: 120, finish: "stop", kvTransfer: 0.012, end: spanfixture.T0 + 2.2})
		return b.Traces()
	})
	_ = generators.Register("trtllm_handler", func() ptrace.Traces {
		b := trtBatch()
		h := b.Span("openai_chat", ptrace.SpanKindServer, "5b8efff798038103d269b633813fc60c", "f1f1f1f1f1f1f1f1", "", spanfixture.NS(spanfixture.T0-0.001), spanfixture.NS(spanfixture.T0+1.502))
		h.Status().SetCode(ptrace.StatusCodeOk)
		d := b.Span("openai_completion", ptrace.SpanKindServer, "8e1b2223cb36b436059ce966b4719f3f", "f2f2f2f2f2f2f2f2", "", spanfixture.NS(spanfixture.T0+0.099), spanfixture.NS(spanfixture.T0+2.202))
		spanfixture.Event(d, "ctx_server.selected", spanfixture.NS(spanfixture.T0+0.1), "server", "ctx-0:8001")
		spanfixture.Event(d, "gen_server.selected", spanfixture.NS(spanfixture.T0+0.6), "server", "gen-0:8002")
		d.Status().SetCode(ptrace.StatusCodeOk)
		return b.Traces()
	})
	_ = generators.Register("trtllm_cancelled", func() ptrace.Traces {
		// Cancelled before the first token: no first or last token time,
		// so TTFT and e2e are the -1 default (and the span starts 1 s after
		// it ends: now − e2e). It did wait 0.8 s in the queue.
		b := trtBatch()
		trtDoTracing(b, trtRequest{traceID: "9f2c3334dc47c547160daf77c5820a4a", spanID: "eee19b7ec3c1b180", id: 5,
			ttft: -1, e2e: -1, queue: 0.8, prompt: 7000, output: 0, finish: "cancelled", end: spanfixture.T0 + 1.0})
		return b.Traces()
	})
)

// TGI.
//
// router/src/server.rs @db931fcf: #[instrument] on generate,
// generate_stream, completions and chat_completions declares the fields
// parameters (Debug of GenerateParameters; completions leaves it out),
// total_time, validation_time, queue_time, inference_time, time_per_token
// and seed, and records the timings (Debug of Duration) only once the
// request succeeded. adapter_id is the request's model unless it is "tgi".
// router/src/infer/mod.rs: Infer::generate and generate_stream are
// #[instrument(skip_all)] child spans of the same names with no fields;
// their tracing::error! events carry a failure. Spans go through
// tracing-opentelemetry 0.21 (router/Cargo.toml; src/layer.rs @v0.21.0):
// code.filepath/namespace/lineno and thread.id/name on start, busy_ns and
// idle_ns on close, kind Internal; an ERROR event becomes a span event
// named by its message (attrs level, target) and sets status Error on the
// span it happened in.

func tgiBatch() *spanfixture.Batch {
	return spanfixture.NewBatch("text_generation_router", "service.name", "text-generation-inference.router")
}

// debugDuration formats like Rust's Debug for Duration.
func debugDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.9f", d.Seconds()), "0"), ".") + "s"
	case d >= time.Millisecond:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", float64(d)/1e6), "0"), ".") + "ms"
	case d >= time.Microsecond:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(d)/1e3), "0"), ".") + "µs"
	}
	return fmt.Sprintf("%dns", d.Nanoseconds())
}

type tgiRouter struct {
	name, traceID, id        string
	lineno                   int
	params                   string // "" for completions
	start                    float64
	validation, queue, inf   time.Duration // zero: failed, not recorded
	tokens                   int
	seed                     string
	busyNS, idleNS, threadID int
}

func tgiRouterSpan(b *spanfixture.Batch, r tgiRouter) ptrace.Span {
	total := r.validation + r.queue + r.inf + 300*time.Microsecond
	end := r.start + total.Seconds()
	if r.inf == 0 {
		end = r.start + 0.004
	}
	s := b.Span(r.name, ptrace.SpanKindInternal, r.traceID, r.id, "", spanfixture.NS(r.start), spanfixture.NS(end))
	spanfixture.Put(s.Attributes(), "code.filepath", "router/src/server.rs", "code.namespace", "text_generation_router::server",
		"code.lineno", r.lineno, "thread.id", r.threadID, "thread.name", "tokio-runtime-worker")
	if r.params != "" {
		spanfixture.Put(s.Attributes(), "parameters", r.params)
	}
	if r.inf != 0 {
		spanfixture.Put(s.Attributes(),
			"total_time", debugDuration(total), "validation_time", debugDuration(r.validation),
			"queue_time", debugDuration(r.queue), "inference_time", debugDuration(r.inf),
			"time_per_token", debugDuration(r.inf/time.Duration(r.tokens)), "seed", r.seed)
	}
	spanfixture.Put(s.Attributes(), "busy_ns", r.busyNS, "idle_ns", r.idleNS)
	return s
}

func tgiInferSpan(b *spanfixture.Batch, name, traceID, id, parent string, start, end float64, lineno int) ptrace.Span {
	s := b.Span(name, ptrace.SpanKindInternal, traceID, id, parent, spanfixture.NS(start), spanfixture.NS(end))
	spanfixture.Put(s.Attributes(), "code.filepath", "router/src/infer/mod.rs", "code.namespace", "text_generation_router::infer",
		"code.lineno", lineno, "thread.id", 7, "thread.name", "tokio-runtime-worker", "busy_ns", 81234, "idle_ns", int(1e9*(end-start))-81234)
	return s
}

func tgiParams(adapter string) string {
	a := "None"
	if adapter != "" {
		a = `Some("` + adapter + `")`
	}
	return "GenerateParameters { adapter_id: " + a + ", best_of: None, temperature: Some(0.5), repetition_penalty: None, " +
		"frequency_penalty: None, top_k: None, top_p: None, typical_p: None, do_sample: true, max_new_tokens: Some(20), " +
		"return_full_text: None, stop: [], truncate: None, watermark: false, details: false, decoder_input_details: false, " +
		"seed: None, top_n_tokens: None, grammar: None }"
}

const (
	tgiTrace1 = "5b8efff798038103d269b633813fc60c"
	tgiTrace2 = "6c9f0008a9149214e37ac744924fd71d"
	tgiTrace3 = "7d0a1119ba25a325f48bd855a3608e2e"
	tgiTrace4 = "8e1b2223cb36b436059ce966b4719f3f"
)

var (
	_ = generators.Register("tgi", func() ptrace.Traces {
		b := tgiBatch()
		// /generate with a LoRA adapter the client named.
		tgiRouterSpan(b, tgiRouter{name: "generate", traceID: tgiTrace1, id: "eee19b7ec3c1b17d", lineno: 272,
			params: tgiParams("customer-a"), start: spanfixture.T0, validation: 1500 * time.Microsecond, queue: 33500 * time.Microsecond,
			inf: 1199300 * time.Microsecond, tokens: 20, seed: "None", busyNS: 2100345, idleNS: 1232398655, threadID: 3})
		// /v1/chat/completions naming the served model, as every OpenAI
		// client does: TGI puts it in adapter_id.
		tgiRouterSpan(b, tgiRouter{name: "chat_completions", traceID: tgiTrace2, id: "eee19b7ec3c1b17e", lineno: 1167,
			params: tgiParams("meta-llama/Llama-3.1-8B-Instruct"), start: spanfixture.T0 + 1, validation: 900 * time.Microsecond,
			queue: 12 * time.Millisecond, inf: 2400 * time.Millisecond, tokens: 64, seed: "Some(29)", busyNS: 3001, idleNS: 2413000000, threadID: 4})
		// /v1/completions records no parameters.
		tgiRouterSpan(b, tgiRouter{name: "completions", traceID: tgiTrace3, id: "eee19b7ec3c1b181", lineno: 716,
			start: spanfixture.T0 + 2, validation: 700 * time.Microsecond, queue: 5 * time.Millisecond, inf: 800 * time.Millisecond,
			tokens: 16, seed: "None", busyNS: 1000, idleNS: 806000000, threadID: 5})
		return b.Traces()
	})
	_ = generators.Register("tgi_infer", func() ptrace.Traces {
		// Infer's own spans for the same requests, ended (and exported)
		// before their router spans.
		b := tgiBatch()
		tgiInferSpan(b, "generate", tgiTrace1, "f0f0f0f0f0f0f001", "eee19b7ec3c1b17d", spanfixture.T0+0.0015, spanfixture.T0+1.2343, 244)
		tgiInferSpan(b, "generate_stream", tgiTrace1, "f0f0f0f0f0f0f002", "f0f0f0f0f0f0f001", spanfixture.T0+0.0015, spanfixture.T0+1.2343, 99)
		return b.Traces()
	})
	_ = generators.Register("tgi_failed", func() ptrace.Traces {
		// A /generate_stream request that failed validation: the router
		// span has its parameters and no timings.
		b := tgiBatch()
		tgiRouterSpan(b, tgiRouter{name: "generate_stream", traceID: tgiTrace4, id: "eee19b7ec3c1b182", lineno: 475,
			params: tgiParams(""), start: spanfixture.T0, busyNS: 900, idleNS: 3000000, threadID: 6})
		return b.Traces()
	})
	_ = generators.Register("tgi_failed_infer", func() ptrace.Traces {
		b := tgiBatch()
		s := tgiInferSpan(b, "generate_stream", tgiTrace4, "f0f0f0f0f0f0f003", "eee19b7ec3c1b182", spanfixture.T0+0.0002, spanfixture.T0+0.0031, 99)
		spanfixture.Event(s, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`",
			spanfixture.NS(spanfixture.T0+0.003), "level", "ERROR", "target", "text_generation_router::infer")
		s.Status().SetCode(ptrace.StatusCodeError)
		return b.Traces()
	})
)
