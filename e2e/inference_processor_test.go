// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// TestInferenceProcessorCanonicalSpans sends vLLM-shaped spans through the
// built binary with `inference` (default settings) in a traces pipeline and
// checks what reaches a real OTLP sink: the canonical attributes, the
// queue/prefill/decode child spans on the request's timeline, no prompt, and
// an engine.step span passed through unchanged.
func TestInferenceProcessorCanonicalSpans(t *testing.T) {
	sink := e2etest.NewSink(t)
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
processors:
  privacy: {}
  step_figures: {}
  inference: {}
exporters:
  otlp_grpc:
    endpoint: SINK
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [privacy, step_figures, inference]
      exporters: [otlp_grpc]
`)
	c := e2etest.Start(t, e2etest.Options{Config: strings.Replace(cfg, "SINK", sink.Endpoint, 1)})

	tracer := e2etest.NewTracer(t, ports.Addr("otlp"),
		attribute.String("service.name", "vllm-server"),
		attribute.String(names.ResourceModelName, "meta-llama/Llama-3.1-8B-Instruct"))
	start := time.Now().Add(-3 * time.Second).Truncate(time.Microsecond)
	req := e2etest.SpanSpec{
		Name: "llm_request", Kind: trace.SpanKindServer,
		Start: start, End: start.Add(2 * time.Second),
		Attributes: []attribute.KeyValue{
			attribute.String("gen_ai.request.id", "chatcmpl-e2e-1"),
			attribute.Float64("gen_ai.request.top_p", 0.9),
			attribute.Int("gen_ai.request.max_tokens", 256),
			attribute.Int("gen_ai.usage.prompt_tokens", 512),
			attribute.Int("gen_ai.usage.completion_tokens", 101),
			attribute.Float64("gen_ai.latency.time_to_first_token", 0.25),
			attribute.Float64("gen_ai.latency.e2e", 2.0),
			attribute.Float64("gen_ai.latency.time_in_queue", 0.05),
			attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.15),
			attribute.Float64("gen_ai.latency.time_in_model_decode", 1.7),
			attribute.Float64("gen_ai.latency.time_in_model_inference", 1.85),
			attribute.String("gen_ai.response.finish_reasons", `["stop"]`),
			attribute.String("gen_ai.prompt", "E2E-SECRET-PROMPT"),
		},
	}
	reqCtx := tracer.Send(t.Context(), "vllm.llm_engine", req)
	step := e2etest.SpanSpec{
		Name: names.SpanEngineStep, Kind: trace.SpanKindInternal,
		Start: start, End: start.Add(30 * time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.Int(names.AttrStepIndex, 7),
			attribute.StringSlice(names.AttrStepRequestIDs, []string{"chatcmpl-e2e-1"}),
		},
	}
	tracer.Send(t.Context(), "inferprof.enginestep", step)
	tracer.Flush(t)

	var spans map[string]ptrace.Span
	require.Eventually(t, func() bool {
		spans = map[string]ptrace.Span{}
		for _, td := range sink.Traces.AllTraces() {
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				sss := td.ResourceSpans().At(i).ScopeSpans()
				for j := 0; j < sss.Len(); j++ {
					for k := 0; k < sss.At(j).Spans().Len(); k++ {
						s := sss.At(j).Spans().At(k)
						spans[s.Name()] = s
					}
				}
			}
		}
		return len(spans) == 5
	}, 30*time.Second, 50*time.Millisecond, "want llm_request, queue, prefill, decode and engine.step at the sink")
	c.Stop()

	s := spans["llm_request"]
	get := func(key string) pcommon.Value {
		v, ok := s.Attributes().Get(key)
		require.Truef(t, ok, "%s missing", key)
		return v
	}
	assert.Equal(t, reqCtx.SpanID().String(), s.SpanID().String())
	assert.InDelta(t, 0.25, get(names.AttrTimeToFirstToken).Double(), 1e-12)
	assert.InDelta(t, 2.0, get(names.AttrE2E).Double(), 1e-12)
	assert.InDelta(t, 1.7/100, get(names.AttrTimePerOutputTok).Double(), 1e-12)
	assert.InDelta(t, 0.1, get(names.AttrTimeInOther).Double(), 1e-9)
	assert.Equal(t, "decode", get(names.AttrBottleneck).Str())
	assert.Equal(t, int64(512), get(names.AttrInputTokens).Int())
	assert.Equal(t, int64(101), get(names.AttrOutputTokens).Int())
	assert.Equal(t, "vllm", get(names.AttrProviderName).Str())
	assert.Equal(t, "chat", get(names.AttrOperationName).Str())
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", get(names.AttrRequestModel).Str())
	_, leaked := s.Attributes().Get("gen_ai.prompt")
	assert.False(t, leaked, "the prompt must not leave the collector")
	_, anomaly := s.Attributes().Get(names.AttrAnomaly)
	assert.False(t, anomaly)

	for _, ph := range []struct {
		name       string
		start, end float64
	}{{"queue", 0.05, 0.10}, {"prefill", 0.10, 0.25}, {"decode", 0.25, 1.95}} {
		p := spans[ph.name]
		assert.Equal(t, s.SpanID(), p.ParentSpanID(), ph.name)
		assert.Equal(t, s.TraceID(), p.TraceID(), ph.name)
		assert.InDelta(t, ph.start, p.StartTimestamp().AsTime().Sub(start).Seconds(), 1e-6, ph.name)
		assert.InDelta(t, ph.end, p.EndTimestamp().AsTime().Sub(start).Seconds(), 1e-6, ph.name)
	}

	// Steps pass on, saying their engine streams no CUDA activity here.
	st := spans[names.SpanEngineStep]
	assert.Equal(t, map[string]any{
		names.AttrStepIndex:      int64(7),
		names.AttrStepRequestIDs: []any{"chatcmpl-e2e-1"},
		names.AttrStepGPUMissing: "no_source",
	}, st.Attributes().AsRaw(), "engine.step spans pass with only the GPU join's word")
}
