// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// extractVLLM reads vLLM's llm_request span.
//
// V1 (vllm/v1/engine/output_processor.py do_tracing) always writes TTFT,
// e2e, queue, prefill, decode and inference, all as differences of the
// request's timestamps, which start at 0.0 (v1/metrics/stats.py
// RequestStateStats). A request that ends before its first token keeps
// first_token_ts = 0: TTFT is 0, decode 0, prefill and inference
// 0 − scheduled_ts, and queue 0 − queued_ts when it was never scheduled. Those
// are placeholders, not measurements: they are dropped, not reported.
//
// V0 wrote TTFT, e2e and queue only. The journey-tracing branch's API span
// writes no latency at all; its api.* events carry the times.
func extractVLLM(n *reader, span ptrace.Span, f *Figures) {
	v1 := n.has(kPrefill) || n.has(kDecode) || n.has(kInference)
	journey := !v1 && !n.has(kE2E) && !n.has(kTTFT)
	f.In = n.count(kPromptTokens, kInputTokens, !journey)
	f.Out = n.count(kCompletionTokens, kOutputTokens, !journey)
	f.Cached = n.cached()
	if journey {
		journeyAPI(span, f)
		return
	}
	f.E2E = n.seconds(kE2E, true)
	if f.Out.ok && f.Out.v == 0 {
		n.drop(kTTFT, kPrefill, kDecode, kInference)
		f.Queue = n.nonNegative(kQueue)
		return
	}
	f.TTFT = n.seconds(kTTFT, true)
	f.Queue = n.seconds(kQueue, true)
	f.Prefill = n.seconds(kPrefill, v1)
	f.Decode = n.seconds(kDecode, v1)
}

// journeyAPI reads the API-layer llm_request span of vLLM's journey-tracing
// branch (entrypoints/openai/engine/serving.py): api.ARRIVED when the
// request came in, api.FIRST_RESPONSE_FROM_CORE with the first token,
// api.DEPARTED or api.ABORTED at the end.
func journeyAPI(span ptrace.Span, f *Figures) {
	arrived, aOK := eventTime(span, "api.ARRIVED")
	first, fOK := eventTime(span, "api.FIRST_RESPONSE_FROM_CORE")
	end, eOK := eventTime(span, "api.DEPARTED")
	aborted, abOK := eventTime(span, "api.ABORTED")
	if !eOK && abOK {
		end, eOK = aborted, true
	}
	f.TTFT = between(arrived, first, aOK, fOK)
	f.E2E = between(arrived, end, aOK, eOK)
	if !f.E2E.ok {
		f.E2E = spanSeconds(span)
	}
	if abOK {
		f.ErrorType = "abort"
	}
}

// journeyCore reads the journey branch's llm_core span (v1/core/sched/
// scheduler.py): journey.QUEUED when the scheduler took the request,
// journey.SCHEDULED (first with schedule.kind FIRST, again after each
// preemption), journey.FIRST_TOKEN, journey.FINISHED with finish.status.
// Like vLLM's own stats, queue runs to the first SCHEDULED and preemptions
// stay inside prefill and decode. It carries no token counts; any found
// are checked like everyone's.
func journeyCore(n *reader, span ptrace.Span, f *Figures) {
	f.In = n.count(kPromptTokens, kInputTokens, false)
	f.Out = n.count(kCompletionTokens, kOutputTokens, false)
	queued, qOK := eventTime(span, "journey.QUEUED")
	sched, sOK := eventTime(span, "journey.SCHEDULED")
	first, fOK := eventTime(span, "journey.FIRST_TOKEN")
	done, dOK := eventTime(span, "journey.FINISHED")
	f.Queue = between(queued, sched, qOK, sOK)
	f.Prefill = between(sched, first, sOK, fOK)
	f.Decode = between(first, done, fOK, dOK)
	if f.Queue.ok {
		f.Phases.Queue = phase(int64(queued), int64(sched))
	}
	if f.Prefill.ok {
		f.Phases.Prefill = phase(int64(sched), int64(first))
	}
	if f.Decode.ok {
		f.Phases.Decode = phase(int64(first), int64(done))
	}
	evs := span.Events()
	for i := 0; i < evs.Len(); i++ {
		if e := evs.At(i); e.Name() == "journey.FINISHED" {
			switch strAttr(e.Attributes(), "finish.status") {
			case "aborted":
				f.ErrorType = "abort"
			case "error":
				f.ErrorType = "error"
			}
			break
		}
	}
}

// cached reads prompt tokens served from the prefix cache: SGLang's (and
// vLLM's token-tracing branch's) gen_ai.usage.cached_tokens, or the semconv
// name if an engine already writes it.
func (n *reader) cached() figure {
	return n.count(kCachedTokens, kCacheRead, false)
}
