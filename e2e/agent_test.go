// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// span starts and ends one span of a hand-built trace at offsets from base.
func span(ctx context.Context, tr trace.Tracer, base time.Time, name string, kind trace.SpanKind, from, to float64, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, s := tr.Start(ctx, name, trace.WithTimestamp(base.Add(secs(from))), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, s
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// engineCall is what vLLM did with one model call.
type engineCall struct {
	queue, prefill, decode float64
	in, out                int
}

// TestAgentRunOnOurEngine: an agent whose two model calls went to a vLLM
// server, traced by the agent (GenAI semconv spans, an httpx-style span
// carrying traceparent) and by vLLM (llm_request as the child of the
// caller's span), through the built collector. The engine's spans arrive
// first; the agent's in two exports, children first. The agent run's
// figures, its queue share and the cost counter match the arithmetic here.
func TestAgentRunOnOurEngine(t *testing.T) {
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
  agent_run:
    agents:
      wait: 300ms
      engine_wait: 20s
    gpu_hour_price:
      "NVIDIA H200": {price: 3.6, currency: USD}
    cost:
      gpu: "NVIDIA H200"
      gpu_count: 2
connectors:
  inference_metrics: {}
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
      processors: [privacy, step_figures, inference, agent_run]
      exporters: [inference_metrics, otlp_grpc]
    metrics:
      receivers: [inference_metrics]
      exporters: [otlp_grpc]
`)
	c := e2etest.Start(t, e2etest.Options{Config: strings.Replace(cfg, "SINK", sink.Endpoint, 1)})

	agentTracer := e2etest.NewTracer(t, ports.Addr("otlp"), attribute.String("service.name", "travel-agent"))
	engineTracer := e2etest.NewTracer(t, ports.Addr("otlp"), attribute.String("service.name", "vllm-server"),
		attribute.String("inferprof.model.name", "Qwen/Qwen3-8B"))
	app, vllm := agentTracer.Tracer("travel_app"), engineTracer.Tracer("vllm.llm_engine")
	base := time.Now().Add(-time.Minute)

	// The agent's side: a server span, the run, two model calls with an
	// HTTP client span each, a tool call between them.
	const runFrom, runTo = 0.0, 10.0
	calls := []struct{ from, to float64 }{{0.5, 3.5}, {6.0, 9.0}}
	const toolFrom, toolTo = 3.6, 5.6
	engine := []engineCall{{queue: 0.8, prefill: 0.2, decode: 1.7, in: 900, out: 120}, {queue: 1.1, prefill: 0.3, decode: 1.2, in: 1400, out: 90}}

	ctx, top := span(t.Context(), app, base, "POST /chat", trace.SpanKindServer, -0.01, runTo+0.01)
	ctx, run := span(ctx, app, base, "invoke_agent Travel agent", trace.SpanKindInternal, runFrom, runTo,
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.provider.name", "vllm"),
		attribute.String("gen_ai.agent.name", "Travel agent"), attribute.String("gen_ai.conversation.id", "conv-1"),
		attribute.String("enduser.id", "user-42"))
	var engineStarts, engineEnds []time.Time
	for i, call := range calls {
		cctx, cs := span(ctx, app, base, "chat Qwen/Qwen3-8B", trace.SpanKindClient, call.from, call.to,
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "vllm"),
			attribute.String("gen_ai.request.model", "Qwen/Qwen3-8B"),
			attribute.Int("gen_ai.usage.input_tokens", engine[i].in), attribute.Int("gen_ai.usage.output_tokens", engine[i].out),
			attribute.String("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"SECRET-PROMPT"}]}]`))
		_, post := span(cctx, app, base, "POST", trace.SpanKindClient, call.from+0.01, call.to-0.01, attribute.String("http.method", "POST"))
		// vLLM: the request arrives 5 ms after the client sent it; its span
		// is the child of the client span whose traceparent it received.
		e := engine[i]
		arrival := call.from + 0.015
		ttft := e.queue + e.prefill
		e2e := ttft + e.decode
		ectx := trace.ContextWithRemoteSpanContext(t.Context(), post.SpanContext())
		_, es := span(ectx, vllm, base, "llm_request", trace.SpanKindServer, arrival, arrival+e2e,
			attribute.Float64("gen_ai.latency.time_to_first_token", ttft), attribute.Float64("gen_ai.latency.e2e", e2e),
			attribute.Float64("gen_ai.latency.time_in_queue", e.queue),
			attribute.Int("gen_ai.usage.prompt_tokens", e.in), attribute.Int("gen_ai.usage.completion_tokens", e.out),
			attribute.Float64("gen_ai.latency.time_in_model_prefill", e.prefill),
			attribute.Float64("gen_ai.latency.time_in_model_decode", e.decode),
			attribute.Float64("gen_ai.latency.time_in_model_inference", e.prefill+e.decode),
			attribute.String("gen_ai.request.id", "chatcmpl-e2e-"+string(rune('a'+i))),
			attribute.String("gen_ai.response.finish_reasons", `["stop"]`))
		es.End(trace.WithTimestamp(base.Add(secs(arrival + e2e))))
		engineStarts, engineEnds = append(engineStarts, base.Add(secs(arrival))), append(engineEnds, base.Add(secs(arrival+e2e)))
		post.End(trace.WithTimestamp(base.Add(secs(call.to - 0.01))))
		cs.End(trace.WithTimestamp(base.Add(secs(call.to))))
		if i == 0 {
			_, tool := span(ctx, app, base, "execute_tool search", trace.SpanKindInternal, toolFrom, toolTo,
				attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "search"),
				attribute.String("gen_ai.tool.call.arguments", `{"q":"SECRET-ARGS"}`))
			tool.End(trace.WithTimestamp(base.Add(secs(toolTo))))
		}
	}
	// The engine's export comes first; then the agent's children, then
	// the run and its server span.
	engineTracer.Flush(t)
	agentTracer.Flush(t)
	run.End(trace.WithTimestamp(base.Add(secs(runTo))))
	top.End(trace.WithTimestamp(base.Add(secs(runTo + 0.01))))
	agentTracer.Flush(t)

	var got ptrace.Span
	require.Eventually(t, func() bool {
		s, _, ok := findSpan(sink.Traces.AllTraces(), "invoke_agent Travel agent")
		got = s
		return ok
	}, 30*time.Second, 50*time.Millisecond, "the agent run never left the collector")
	a := got.Attributes().AsRaw()
	model := (calls[0].to - calls[0].from) + (calls[1].to - calls[1].from)
	tools := toolTo - toolFrom
	queue := engine[0].queue + engine[1].queue
	assert.InDelta(t, model, a["inferprof.agent.time_in_model"], 1e-6)
	assert.InDelta(t, tools, a["inferprof.agent.time_in_tools"], 1e-6)
	assert.InDelta(t, runTo-runFrom-model-tools, a["inferprof.agent.time_in_other"], 1e-6)
	assert.EqualValues(t, 2, a["inferprof.agent.model_calls"])
	assert.EqualValues(t, 1, a["inferprof.agent.tool_calls"])
	assert.EqualValues(t, 2, a["inferprof.agent.engine_calls"])
	assert.InDelta(t, queue, a["inferprof.agent.time_in_queue"], 1e-6)
	assert.InDelta(t, engine[0].prefill+engine[1].prefill, a["inferprof.agent.time_in_prefill"], 1e-6)
	assert.InDelta(t, engine[0].decode+engine[1].decode, a["inferprof.agent.time_in_decode"], 1e-6)
	assert.EqualValues(t, 1, a["inferprof.agent.turn"])

	// Each model call carries the queue, prefill and decode of the request
	// that served it, and the rest of the call (network, frontend) as other.
	var chats []agentrecording.Span
	for _, s := range agentrecording.Flatten(sink.Traces.AllTraces()...) {
		if s.Name == "chat Qwen/Qwen3-8B" {
			chats = append(chats, s)
		}
	}
	require.Len(t, chats, len(calls))
	slices.SortFunc(chats, func(x, y agentrecording.Span) int {
		tx, _ := time.Parse(time.RFC3339Nano, x.Start)
		ty, _ := time.Parse(time.RFC3339Nano, y.Start)
		return tx.Compare(ty)
	})
	for i, cs := range chats {
		e := engine[i]
		ca := cs.Attributes
		assert.InDelta(t, e.queue, ca["inferprof.call.time_in_queue"], 1e-6, "call %d", i)
		assert.InDelta(t, e.prefill, ca["inferprof.call.time_in_prefill"], 1e-6, "call %d", i)
		assert.InDelta(t, e.decode, ca["inferprof.call.time_in_decode"], 1e-6, "call %d", i)
		assert.InDelta(t, calls[i].to-calls[i].from-e.queue-e.prefill-e.decode, ca["inferprof.call.time_in_other"], 1e-6, "call %d", i)
	}

	// Cost, token share: the first request alone in the window pays its own
	// wall time; the second shares the time since the first began by tokens.
	perSecond := 2 * 3.6 / 3600 // two GPUs
	tok := func(e engineCall) float64 { return float64(e.in + e.out) }
	cost1 := engineEnds[0].Sub(engineStarts[0]).Seconds() * perSecond
	cost2 := engineEnds[1].Sub(engineStarts[0]).Seconds() * tok(engine[1]) / (tok(engine[0]) + tok(engine[1])) * perSecond
	assert.InDelta(t, cost1+cost2, a["inferprof.agent.cost"], 1e-9)

	// Prompts and tool arguments are gone from every span.
	for _, td := range sink.Traces.AllTraces() {
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "SECRET")
	}

	c.Stop()
	var cost pmetric.NumberDataPoint
	require.Eventually(t, func() bool {
		var ok bool
		cost, ok = findNumberPoint(sink.Metrics.AllMetrics(), "inferprof.cost", pmetric.MetricTypeSum)
		return ok
	}, 10*time.Second, 50*time.Millisecond, "no inferprof.cost reached the sink")
	assert.InDelta(t, cost1+cost2, cost.DoubleValue(), 1e-9)
	ca := cost.Attributes().AsRaw()
	assert.Equal(t, "Qwen/Qwen3-8B", ca["gen_ai.request.model"])
	assert.Equal(t, "vllm", ca["gen_ai.provider.name"])
	assert.Equal(t, "Travel agent", ca["gen_ai.agent.name"], "the engine span waited for its caller's agent")
	assert.Equal(t, "user-42", ca["enduser.id"])
	assert.Equal(t, "USD", ca["inferprof.cost.currency"])

	per1k, ok := findNumberPoint(sink.Metrics.AllMetrics(), "inferprof.cost.per_1k_output_tokens", pmetric.MetricTypeGauge)
	require.True(t, ok)
	assert.InDelta(t, 1000*(cost1+cost2)/float64(engine[0].out+engine[1].out), per1k.DoubleValue(), 1e-9)

	runs, ok := findHistogramPoint(sink.Metrics.AllMetrics(), "inferprof.agent.run.duration")
	require.True(t, ok)
	assert.EqualValues(t, 1, runs.Count())
	assert.InDelta(t, runTo-runFrom, runs.Sum(), 1e-6)
	turns, ok := findHistogramPoint(sink.Metrics.AllMetrics(), "inferprof.agent.conversation.turns")
	require.True(t, ok, "shutdown observes the open conversation")
	assert.InDelta(t, 1, turns.Sum(), 1e-9)
}

// findNumberPoint returns the first data point of the sum or gauge name.
func findNumberPoint(all []pmetric.Metrics, name string, typ pmetric.MetricType) (pmetric.NumberDataPoint, bool) {
	for _, md := range all {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != name || m.Type() != typ {
						continue
					}
					var dps pmetric.NumberDataPointSlice
					if typ == pmetric.MetricTypeGauge {
						dps = m.Gauge().DataPoints()
					} else {
						dps = m.Sum().DataPoints()
					}
					if dps.Len() > 0 {
						return dps.At(0), true
					}
				}
			}
		}
	}
	return pmetric.NumberDataPoint{}, false
}
