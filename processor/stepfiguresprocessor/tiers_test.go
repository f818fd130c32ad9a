// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/privacyprocessor"
)

// The two tiers of config/agent.yaml and config/gateway.yaml: an agent
// running privacy and step_figures (inter-token latency from its node's
// steps), then a gateway running privacy and inference (figures, phase
// spans, SGLang join), must give what one collector running all three gives.

type stage int

const (
	privacyStage stage = iota
	stepsStage
	inferenceStage
)

// pipeline runs tds through the stages in order, shuts them down and
// returns what came out, and the telemetry of the inference stage.
func pipeline(t *testing.T, stages []stage, tds ...ptrace.Traces) ([]ptrace.Traces, *componenttest.Telemetry) {
	t.Helper()
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	var next consumer.Traces = sink
	var procs []processor.Traces
	for i := len(stages) - 1; i >= 0; i-- {
		var f processor.Factory
		var cfg component.Config
		switch stages[i] {
		case privacyStage:
			f = privacyprocessor.NewFactory()
			cfg = f.CreateDefaultConfig()
		case stepsStage:
			f = NewFactory()
			cfg = f.CreateDefaultConfig()
		case inferenceStage:
			f = inferenceprocessor.NewFactory()
			c := f.CreateDefaultConfig().(*inferenceprocessor.Config)
			c.Model.Default = "meta-llama/Llama-3.1-8B-Instruct"
			cfg = c
		}
		set := processortest.NewNopSettings(f.Type())
		if stages[i] == inferenceStage {
			set.TelemetrySettings = tel.NewTelemetrySettings()
		}
		tp, err := f.CreateTraces(t.Context(), set, cfg, next)
		require.NoError(t, err)
		require.NoError(t, tp.Start(t.Context(), componenttest.NewNopHost()))
		procs = append(procs, tp)
		next = tp
	}
	for _, td := range tds {
		require.NoError(t, next.ConsumeTraces(t.Context(), td))
	}
	// Shut down from the front, so what a stage releases meets the next one
	// still running.
	for i := len(procs) - 1; i >= 0; i-- {
		require.NoError(t, procs[i].Shutdown(t.Context()))
	}
	return sink.AllTraces(), tel
}

var (
	single  = []stage{privacyStage, stepsStage, inferenceStage}
	agent   = []stage{privacyStage, stepsStage}
	gateway = []stage{privacyStage, inferenceStage}
)

// requestSpans returns the request and phase spans of tds by name, request
// id and span id, leaving step spans out.
func requestSpans(tds []ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if s.Name() == names.SpanEngineStep {
						continue
					}
					key := s.Name()
					if v, ok := s.Attributes().Get(names.AttrRequestID); ok {
						key += "/" + v.AsString()
					}
					out[key+"/"+s.SpanID().String()] = s
				}
			}
		}
	}
	return out
}

// sameSpans checks that got has the request and phase spans of want, each
// equal in every field (ptracetest).
func sameSpans(t *testing.T, want, got []ptrace.Traces) {
	t.Helper()
	w, g := requestSpans(want), requestSpans(got)
	require.Len(t, g, len(w))
	for k, ws := range w {
		gs, ok := g[k]
		require.True(t, ok, k)
		assert.NoError(t, ptracetest.CompareSpan(ws, gs), k)
	}
}

func clone(td ptrace.Traces) ptrace.Traces {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	return c
}

func TestAgentLeavesFiguresToGateway(t *testing.T) {
	steps := stepBatch("vllm", 1, []float64{0.10, 0.12, 0.14, 0.30, 0.32}, "req-1")
	req := vllmSpan("vllm", "req-1", 0, 0.35, 5)
	req.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("gen_ai.prompt", "secret")

	// The processors change what they are given: each run gets its own copy.
	one, _ := pipeline(t, single, clone(steps), clone(req))

	agentOut, _ := pipeline(t, agent, clone(steps), clone(req))
	// The agent: content gone, inter-token figures written, no canonical
	// figures or phase spans yet.
	a := spansByName(agentOut...)
	r := a["llm_request"]
	absent(t, r, "gen_ai.prompt", names.AttrTimeInOther, names.AttrBottleneck, names.AttrProviderName)
	assert.InDelta(t, 0.160, dbl(t, r, names.AttrITLMax), 1e-9)
	assert.NotContains(t, a, "prefill")

	gatewayOut, _ := pipeline(t, gateway, agentOut...)
	sameSpans(t, one, gatewayOut)
	assert.InDelta(t, 0.160, dbl(t, spansByName(gatewayOut...)["llm_request"], names.AttrITLMax), 1e-9)
}

// fixture reads one of the inference processor's recorded span batches.
func fixture(t *testing.T, name string) ptrace.Traces {
	t.Helper()
	td, err := golden.ReadTraces(filepath.Join("..", "inferenceprocessor", "testdata", "spans", name+".json"))
	require.NoError(t, err)
	return td
}

func fixtures(t *testing.T, names ...string) []ptrace.Traces {
	t.Helper()
	out := make([]ptrace.Traces, len(names))
	for i, n := range names {
		out[i] = fixture(t, n)
	}
	return out
}

func TestAgentPassesSGLangPDForTheGatewayJoin(t *testing.T) {
	// The PD request's prefill stages on one node, both roots and the decode
	// stages on another: each agent passes its part on at once (no join
	// there), and the gateway, given both parts, joins as one collector would.
	nodeA := []string{"sglang_pd_prefill_stages"}
	nodeB := []string{"sglang_pd_prefill_root", "sglang_pd_decode_root", "sglang_pd_decode_stages"}
	one, _ := pipeline(t, single, fixtures(t, append(append([]string{}, nodeB...), nodeA...)...)...)

	outA, _ := pipeline(t, agent, fixtures(t, nodeA...)...)
	outB, _ := pipeline(t, agent, fixtures(t, nodeB...)...)
	for _, s := range spansByName(outB...) {
		absent(t, s, names.AttrTimeInOther, names.AttrTimeInQueue)
	}
	// Roots reach the gateway before the prefill stages, the order a join
	// must wait for.
	gatewayOut, tel := pipeline(t, gateway, append(outB, outA...)...)
	sameSpans(t, one, gatewayOut)
	// The join happened at the gateway: the roots waited for their stages.
	roots := spansByName(gatewayOut...)
	assert.InDelta(t, 0.12, dbl(t, roots["prefill Req 5e6f7a8b"], names.AttrTimeInQueue), 1e-9)
	_, err := tel.GetMetric("otelcol_processor_inference_join_timeouts")
	assert.Error(t, err, "no root may time out waiting for its stage")
}
