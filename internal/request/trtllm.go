// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// trtMissing is what TensorRT-LLM writes for a figure it did not measure
// (executor/result.py do_tracing: metrics_dict.get(..., -1); the metrics
// dict keeps only positive figures).
const trtMissing = -1

// extractTRT reads TensorRT-LLM's llm_request span: TTFT, e2e and queue in
// seconds, no prefill, decode or inference figures, token counts.
func extractTRT(n *reader, span ptrace.Span, f *Figures) {
	f.TTFT = n.secondsOr(kTTFT, true, trtMissing)
	f.E2E = n.secondsOr(kE2E, true, trtMissing)
	f.Queue = n.secondsOr(kQueue, false, trtMissing)
	f.In = n.count(kPromptTokens, kInputTokens, false)
	f.Out = n.count(kCompletionTokens, kOutputTokens, false)
	f.Cached = n.cached()
	if f.Out.ok && f.Out.v == 0 && f.TTFT.ok {
		// No output token: no first token either.
		n.drop(kTTFT)
		f.TTFT = figure{}
	}
	if !f.E2E.ok {
		// Without a last token TensorRT-LLM has no e2e; the span itself
		// still covers the request when its clock is sound.
		f.E2E = spanSeconds(span)
	}
}
