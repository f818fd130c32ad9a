// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// extractTGI reads a TGI router handler span (router/src/server.rs). TGI
// records total_time, validation_time, queue_time, inference_time and
// time_per_token as Rust Debug durations, and only when the request
// succeeded: a router span without total_time is a request that did not
// succeed (failed, or abandoned by the client; TGI does not say which).
func extractTGI(n *reader, span ptrace.Span, f *Figures) {
	// TGI writes no token counts today; read them if a version does.
	f.In = n.count(kPromptTokens, kInputTokens, false)
	f.Out = n.count(kCompletionTokens, kOutputTokens, false)
	if !n.has(kTGITotal) {
		f.E2E = spanSeconds(span)
		f.ErrorType = names.ErrorTypeOther
		return
	}
	f.E2E = n.duration(kTGITotal, true)
	f.Queue = n.duration(kTGIQueue, false)
	f.Inference = n.duration(kTGIInference, false)
	f.WriteInference = f.Inference.ok
	// validation_time = queued − start and queue_time = start − queued, both
	// from the handler's own Instant, so the queue begins validation_time
	// after the span starts.
	if v := n.duration(kTGIValidation, false); v.ok && f.Queue.ok && span.StartTimestamp() != 0 {
		f.QueueStart = span.StartTimestamp() + pcommon.Timestamp(nanos(v.v))
	}
}

// tgiAdapter finds adapter_id: Some("name") in TGI's Debug-formatted
// GenerateParameters.
func tgiAdapter(params string) string {
	const marker = `adapter_id: Some("`
	i := strings.Index(params, marker)
	if i < 0 {
		return ""
	}
	rest := params[i+len(marker):]
	j := strings.IndexByte(rest, '"')
	if j <= 0 || j > 256 {
		return ""
	}
	return rest[:j]
}
