// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// extractSGLang reads SGLang's root request span. The latency attributes
// come from req_time_stats.py convert_to_gen_ai_span_attrs, each written
// only when its timestamps exist (a request aborted before its first token
// has no TTFT, prefill or decode). SGLang's prefill runs from dispatch to
// the first token, so it includes queueing; the queue itself only exists as
// a stage span from the scheduler, which the join supplies in q.
func extractSGLang(n *reader, span ptrace.Span, q Queue, f *Figures) {
	role, _ := SGLangRole(span.Name())
	f.TTFT = n.seconds(kTTFT, false)
	f.E2E = n.seconds(kE2E, true)
	f.Prefill = n.seconds(kPrefill, false)
	f.Decode = n.seconds(kDecode, false)
	f.In = n.count(kPromptTokens, kInputTokens, false)
	f.Out = n.count(kCompletionTokens, kOutputTokens, false)
	f.Cached = n.cached()
	f.QueueInPrefill = true
	// TokenizerManager._handle_abort_req (0.5.23) ends the root of a request
	// aborted before the scheduler answered (still in the waiting queue)
	// with set_finished_time() alone: no usage, no finish reason. A root the
	// scheduler's output finished always has prompt tokens
	// (convert_to_span_attrs), so a root with neither is an abort.
	if _, reasons := span.Attributes().Get(srcFinishReasons); !reasons && !n.has(kPromptTokens) && !n.has(kInputTokens) {
		f.ErrorType = "abort"
	}
	if !q.Known {
		return
	}
	if role == RoleDecode {
		// decode_waiting on a PD decode server is that server's queue; it
		// has its own attribute, and the decode root's prefill (which
		// spans the remote prefill and the KV transfer) is left as it is.
		f.DecodeQueue = figure{q.Seconds, true}
		return
	}
	f.QueueStart = q.Start
	if !f.Prefill.ok {
		f.Queue = figure{q.Seconds, true}
		return
	}
	engine := f.Prefill.v - q.Seconds
	switch {
	case engine >= 0:
		f.Queue, f.Prefill = figure{q.Seconds, true}, figure{engine, true}
	case -engine <= tolerance(f.Prefill.v):
		f.Queue, f.Prefill = figure{f.Prefill.v, true}, figure{0, true}
	default:
		n.anomaly("queue_exceeds_prefill")
	}
}
