// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"encoding/json"
	"math"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// SGLang.
//
// python/sglang/srt/observability/trace.py @b8e5a7c3: TraceReqContext
// starts the root "{role} Req {rid[:8]}" (role "" when unified) with attrs
// rid and module, then a thread span per process
// "{label}[ [TP n] ](host:{host[:8]} | pid:{pid})" (attrs tp_rank, host_id,
// pid, thread_label), and slices (stages) under the thread span, each
// linked to the previous one. Span ids are getrandbits(64), trace ids too
// unless the request carried a traceparent (TraceCustomIdGenerator).
// python/sglang/srt/observability/req_time_stats.py @602413bc: which stage
// is emitted when, at which trace level, from perf_counter() timestamps
// converted to wall clock; convert_to_gen_ai_span_attrs writes each
// latency only when its timestamps exist.
// python/sglang/srt/managers/tokenizer_manager_components/request_tracing.py
// @2d396b52 make_span_attrs: the root's attributes at finish.
// The root comes from the tokenizer process, stages from the scheduler:
// two export batches.

// sglDiff is global_diff_realtime_monotonic: perf_counter 100.0 is t0.
const sglDiff = t0 - 100.0

func sglNS(perf float64) int64 { return int64((perf + sglDiff) * 1e9) }

// sglTimes mirrors APIServerReqTimeStats (perf_counter seconds, 0 = unset).
type sglTimes struct {
	created, tokenizeFinish, dispatch, dispatchFinish, firstToken, finished float64
}

type sglRoot struct {
	name, traceID, rootID, parent, rid string
	bootstrapRoom                      string // "" when not PD
	prompt, completion, cached         int
	finish                             string
	times                              sglTimes
}

func sglBatch(process string) *batch {
	return newBatch("sglang server", "service.name", "sglang", "host.name", "gpu-node-1", "sglang.process", process)
}

// root writes the root span the way trace_req_start and trace_req_finish
// do, with make_span_attrs' attributes in order.
func (b *batch) sglRoot(r sglRoot) ptrace.Span {
	t := r.times
	s := b.span(r.name, ptrace.SpanKindInternal, r.traceID, r.rootID, r.parent, sglNS(t.created), sglNS(t.finished))
	put(s.Attributes(), "rid", r.rid, "module", "sglang::request")
	if r.bootstrapRoom != "" {
		put(s.Attributes(), "bootstrap_room", r.bootstrapRoom)
	}
	put(s.Attributes(),
		"gen_ai.usage.completion_tokens", r.completion, "gen_ai.usage.prompt_tokens", r.prompt,
		"gen_ai.usage.cached_tokens", r.cached, "gen_ai.request.id", r.rid,
		"gen_ai.request.max_tokens", 256, "gen_ai.request.temperature", 0.6, "gen_ai.request.top_k", 20,
		"gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
	if r.finish != "" {
		reasons, _ := json.Marshal([]string{r.finish})
		put(s.Attributes(), "gen_ai.response.finish_reasons", string(reasons))
	}
	// convert_to_gen_ai_span_attrs
	if t.firstToken != 0 && t.created != 0 {
		put(s.Attributes(), "gen_ai.latency.time_to_first_token", t.firstToken-t.created)
	}
	if t.finished != 0 && t.created != 0 {
		put(s.Attributes(), "gen_ai.latency.e2e", t.finished-t.created)
	}
	if t.firstToken != 0 && t.finished != 0 {
		put(s.Attributes(), "gen_ai.latency.time_in_model_decode", t.finished-t.firstToken)
	}
	if t.dispatchFinish != 0 && t.finished != 0 {
		put(s.Attributes(), "gen_ai.latency.time_in_model_inference", t.finished-t.dispatchFinish)
	}
	if t.dispatchFinish != 0 && t.firstToken != 0 {
		put(s.Attributes(), "gen_ai.latency.time_in_model_prefill", t.firstToken-t.dispatchFinish)
	}
	return s
}

// thread writes a thread span.
func (b *batch) sglThread(label string, tp int, pid int, traceID, id, root string, start, end float64) {
	name := label
	if tp >= 0 {
		name += " [TP " + itoa(tp) + "] "
	}
	name += "(host:1a2b3c4d | pid:" + itoa(pid) + ")"
	s := b.span(name, ptrace.SpanKindInternal, traceID, id, root, sglNS(start), sglNS(end))
	if tp >= 0 {
		put(s.Attributes(), "tp_rank", tp)
	}
	put(s.Attributes(), "host_id", "1a2b3c4d5e6f70819a0b1c2d3e4f5061", "pid", pid, "thread_label", label)
}

// slice writes one stage span under a thread span.
func (b *batch) sglSlice(name, traceID, id, thread string, start, end float64, kv ...any) ptrace.Span {
	s := b.span(name, ptrace.SpanKindInternal, traceID, id, thread, sglNS(start), sglNS(end))
	put(s.Attributes(), kv...)
	return s
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func nan() float64 { return math.NaN() }

// The unified request: queued 0.30 s, prefill 0.18 s, a 0.05 s gap before
// the first decode batch (decode_waiting, unified mode), then decode.
const (
	sglTrace   = "00000000000000004f2a9c1d7e3b5a61"
	sglRootID  = "a1b2c3d4e5f60718"
	sglThreadT = "b0b1b2b3b4b5b6b7" // tokenizer thread span
	sglThreadS = "b1b2b3b4b5b6b7b8" // scheduler thread span
)

var sglUnified = sglTimes{created: 100.0, tokenizeFinish: 100.008, dispatch: 100.008, dispatchFinish: 100.02,
	firstToken: 100.5, finished: 103.0}

func sglangRoot(name string) ptrace.Traces {
	b := sglBatch("tokenizer")
	t := sglUnified
	b.sglRoot(sglRoot{name: name, traceID: sglTrace, rootID: sglRootID, rid: "1a2b3c4de5f6a7b8",
		prompt: 1024, completion: 200, cached: 512, finish: "stop", times: t})
	b.sglThread("Tokenizer", -1, 700, sglTrace, sglThreadT, sglRootID, t.created, t.dispatchFinish)
	b.sglSlice("tokenize", sglTrace, "e000000000000001", sglThreadT, t.created, t.tokenizeFinish)
	b.sglSlice("dispatch", sglTrace, "e000000000000002", sglThreadT, t.dispatch, t.dispatchFinish)
	return b.traces()
}

// sglangStages is the scheduler's batch at a trace level: 1 has the
// level-1 stages, 3 adds request_process (2), chunked_prefill and
// decode_loop (3).
func sglangStages(level int) ptrace.Traces {
	b := sglBatch("scheduler")
	const recv, waitEntry, forward, prefillDone, firstDecode, done = 100.021, 100.022, 100.322, 100.49, 100.54, 102.99
	b.sglThread("Scheduler", 0, 777, sglTrace, sglThreadS, sglRootID, recv, done)
	if level >= 2 {
		b.sglSlice("request_process", sglTrace, "c000000000000004", sglThreadS, recv, waitEntry)
	}
	b.sglSlice("prefill_waiting", sglTrace, "c000000000000001", sglThreadS, waitEntry, forward)
	if level >= 3 {
		b.sglSlice("chunked_prefill", sglTrace, "c000000000000005", sglThreadS, forward, 100.41)
		b.sglSlice("chunked_prefill", sglTrace, "c000000000000006", sglThreadS, 100.41, prefillDone)
	}
	b.sglSlice("prefill_forward", sglTrace, "c000000000000002", sglThreadS, forward, prefillDone)
	b.sglSlice("decode_waiting", sglTrace, "c000000000000007", sglThreadS, prefillDone, firstDecode)
	if level >= 3 {
		last := firstDecode
		for i := 0; i < 4; i++ {
			end := firstDecode + 0.0123*float64(i+1)
			b.sglSlice("decode_loop", sglTrace, "d00000000000000"+itoa(i), sglThreadS, last, end, "decode_ct", i)
			last = end
		}
	}
	b.sglSlice("decode_forward", sglTrace, "c000000000000003", sglThreadS, firstDecode, done)
	return b.traces()
}

var (
	_ = register("sglang_root", func() ptrace.Traces { return sglangRoot(" Req 1a2b3c4d") })
	// The first tracing module (python/sglang/srt/tracing/trace.py
	// @bad7b92e) named the root f"Req {rid[:8]}", no leading space, and set
	// bootstrap_room "None"; SGLang 0.5.20 exports still carry that name.
	_ = register("sglang_root_legacy", func() ptrace.Traces {
		td := sglangRoot("Req 1a2b3c4d")
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("bootstrap_room", "None")
		return td
	})
	_ = register("sglang_stages_level1", func() ptrace.Traces { return sglangStages(1) })
	_ = register("sglang_stages_level3", func() ptrace.Traces { return sglangStages(3) })

	// Aborted during prefill: no first token, so the root has no TTFT,
	// prefill or decode; the scheduler's abort() sets the thread span's
	// status to ERROR with the finish reason's to_json().
	_ = register("sglang_abort_root", func() ptrace.Traces {
		b := sglBatch("tokenizer")
		t := sglTimes{created: 200.0, tokenizeFinish: 200.004, dispatch: 200.004, dispatchFinish: 200.01, finished: 200.9}
		b.sglRoot(sglRoot{name: " Req 9c8d7e6f", traceID: "00000000000000009c8d7e6f5a4b3c2d", rootID: "a9a9a9a9a9a9a9a9",
			rid: "9c8d7e6f5a4b3c2d", prompt: 4000, cached: 0, finish: "abort", times: t})
		return b.traces()
	})
	_ = register("sglang_abort_stages", func() ptrace.Traces {
		b := sglBatch("scheduler")
		const trace = "00000000000000009c8d7e6f5a4b3c2d"
		b.sglThread("Scheduler", 0, 777, trace, "b9b9b9b9b9b9b9b9", "a9a9a9a9a9a9a9a9", 200.011, 200.89)
		th := b.spans.At(b.spans.Len() - 1)
		th.Status().SetCode(ptrace.StatusCodeError)
		put(th.Attributes(), "type", "abort", "message", "Abort by client", "status_code", 499)
		b.sglSlice("prefill_waiting", trace, "c9c9c9c9c9c9c901", "b9b9b9b9b9b9b9b9", 200.012, 200.7)
		return b.traces()
	})
)

// PD disaggregation. The router (sglang_router) passes one traceparent to
// the prefill and the decode server, so both roots share its trace; each
// server's tokenizer names its root with its role and sets bootstrap_room;
// each scheduler emits its role's stages (req_time_stats.py):
// prefill: prefill_prepare, prefill_bootstrap, prefill_waiting,
// prefill_forward, prefill_transfer_kv_cache; decode: decode_prepare,
// decode_bootstrap, decode_transferred, decode_waiting (the decode server's
// queue), decode_forward.
const (
	pdTrace      = "2f1e0d9c8b7a69584736251403f2e1d0"
	pdRouterSpan = "f0f0f0f0f0f0f0f0"
	pdRoom       = "0x3ade68b1"
)

var (
	_ = register("sglang_pd_prefill_root", func() ptrace.Traces {
		b := newBatch("sglang server", "service.name", "sglang-prefill", "host.name", "gpu-node-1")
		b.sglRoot(sglRoot{name: "prefill Req 5e6f7a8b", traceID: pdTrace, rootID: "a0a0a0a0a0a0a001", parent: pdRouterSpan,
			rid: "5e6f7a8b9c0d1e2f", bootstrapRoom: pdRoom, prompt: 2048, completion: 1, cached: 1024, finish: "length",
			times: sglTimes{created: 300.0, tokenizeFinish: 300.01, dispatch: 300.01, dispatchFinish: 300.02,
				firstToken: 300.62, finished: 300.63}})
		return b.traces()
	})
	_ = register("sglang_pd_prefill_stages", func() ptrace.Traces {
		b := newBatch("sglang server", "service.name", "sglang-prefill", "host.name", "gpu-node-1", "sglang.process", "scheduler")
		th := "b0b0b0b0b0b0b001"
		b.sglThread("Scheduler", 0, 801, pdTrace, th, "a0a0a0a0a0a0a001", 300.021, 300.7)
		b.sglSlice("prefill_prepare", pdTrace, "c0c0c0c0c0c0c001", th, 300.021, 300.022)
		b.sglSlice("prefill_bootstrap", pdTrace, "c0c0c0c0c0c0c002", th, 300.022, 300.08)
		b.sglSlice("prefill_waiting", pdTrace, "c0c0c0c0c0c0c003", th, 300.08, 300.2)
		b.sglSlice("prefill_forward", pdTrace, "c0c0c0c0c0c0c004", th, 300.2, 300.6)
		b.sglSlice("prefill_transfer_kv_cache", pdTrace, "c0c0c0c0c0c0c005", th, 300.6, 300.7)
		return b.traces()
	})
	_ = register("sglang_pd_decode_root", func() ptrace.Traces {
		b := newBatch("sglang server", "service.name", "sglang-decode", "host.name", "gpu-node-2")
		b.sglRoot(sglRoot{name: "decode Req 5e6f7a8b", traceID: pdTrace, rootID: "a0a0a0a0a0a0a002", parent: pdRouterSpan,
			rid: "5e6f7a8b9c0d1e2f", bootstrapRoom: pdRoom, prompt: 2048, completion: 200, cached: 0, finish: "stop",
			times: sglTimes{created: 400.0, tokenizeFinish: 400.01, dispatch: 400.01, dispatchFinish: 400.02,
				firstToken: 400.81, finished: 403.2}})
		return b.traces()
	})
	_ = register("sglang_pd_decode_stages", func() ptrace.Traces {
		b := newBatch("sglang server", "service.name", "sglang-decode", "host.name", "gpu-node-2", "sglang.process", "scheduler")
		th := "b0b0b0b0b0b0b002"
		b.sglThread("Scheduler", 0, 901, pdTrace, th, "a0a0a0a0a0a0a002", 400.021, 403.19)
		b.sglSlice("decode_prepare", pdTrace, "c0c0c0c0c0c0c011", th, 400.021, 400.03)
		b.sglSlice("decode_bootstrap", pdTrace, "c0c0c0c0c0c0c012", th, 400.03, 400.1)
		b.sglSlice("decode_transferred", pdTrace, "c0c0c0c0c0c0c013", th, 400.1, 400.7)
		b.sglSlice("decode_waiting", pdTrace, "c0c0c0c0c0c0c014", th, 400.7, 400.78)
		b.sglSlice("decode_forward", pdTrace, "c0c0c0c0c0c0c015", th, 400.78, 403.19)
		return b.traces()
	})
)
