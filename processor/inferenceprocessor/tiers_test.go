// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// The two tiers of config/agent.yaml and config/gateway.yaml: an agent with
// defer_figures (privacy, inter-token latency from its node's steps), then a
// gateway with engine_steps off (figures, phase spans, SGLang join), must
// give what one processor given every span gives.

func agentConfig() *Config {
	cfg := goldenConfig()
	cfg.DeferFigures = true
	return cfg
}

func gatewayConfig() *Config {
	cfg := goldenConfig()
	cfg.EngineSteps.Enabled = false
	return cfg
}

// requestSpans returns the request and phase spans of tds by name and
// request id, leaving step spans out.
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

func TestAgentDefersFiguresToGateway(t *testing.T) {
	steps := stepBatch("vllm", 1, []float64{0.10, 0.12, 0.14, 0.30, 0.32}, "req-1")
	req := vllmSpan("vllm", "req-1", 0, 0.35, 5)
	req.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("gen_ai.prompt", "secret")

	// The processor changes what it is given: each run gets its own copy.
	single, _ := runBatches(t, goldenConfig(), clone(steps), clone(req))

	agentOut, _ := runBatches(t, agentConfig(), clone(steps), clone(req))
	// The agent: content gone, inter-token figures written, no canonical
	// figures or phase spans yet.
	a := spansByName(agentOut...)
	r := a["llm_request"]
	absent(t, r, "gen_ai.prompt", names.AttrTimeInOther, names.AttrBottleneck, names.AttrProviderName)
	assert.InDelta(t, 0.160, dbl(t, r, names.AttrITLMax), 1e-9)
	assert.NotContains(t, a, "prefill")

	gatewayOut, _ := runBatches(t, gatewayConfig(), agentOut...)
	sameSpans(t, single, gatewayOut)
}

// sameSpans checks that got has the request and phase spans of want, with
// the same attributes and times.
func sameSpans(t *testing.T, want, got []ptrace.Traces) {
	t.Helper()
	w, g := requestSpans(want), requestSpans(got)
	require.Equal(t, len(w), len(g))
	for k, ws := range w {
		gs, ok := g[k]
		require.True(t, ok, k)
		assert.Equal(t, ws.Attributes().AsRaw(), gs.Attributes().AsRaw(), k)
		assert.Equal(t, ws.StartTimestamp(), gs.StartTimestamp(), k)
		assert.Equal(t, ws.EndTimestamp(), gs.EndTimestamp(), k)
	}
}

func TestAgentPassesSGLangPDForTheGatewayJoin(t *testing.T) {
	// The PD request's prefill stages on one node, both roots and the decode
	// stages on another: each agent passes its part on at once (no join
	// there), and the gateway, given both parts, joins as one processor would.
	nodeA := []string{"sglang_pd_prefill_stages"}
	nodeB := []string{"sglang_pd_prefill_root", "sglang_pd_decode_root", "sglang_pd_decode_stages"}
	single, _ := runFixtures(t, goldenConfig(), append(append([]string{}, nodeB...), nodeA...)...)

	outA, _ := runFixtures(t, agentConfig(), nodeA...)
	outB, _ := runFixtures(t, agentConfig(), nodeB...)
	for _, s := range spansByName(outB...) {
		absent(t, s, names.AttrTimeInOther, names.AttrTimeInQueue)
	}
	// Roots reach the gateway before the prefill stages, the order a join
	// must wait for.
	gatewayOut, tel := runBatches(t, gatewayConfig(), append(outB, outA...)...)
	sameSpans(t, single, gatewayOut)
	// The join happened at the gateway: the roots waited for their stages.
	roots := spansByName(gatewayOut...)
	assert.InDelta(t, 0.12, dbl(t, roots["prefill Req 5e6f7a8b"], names.AttrTimeInQueue), 1e-9)
	_, err := tel.GetMetric("otelcol_processor_inference_join_timeouts")
	assert.Error(t, err, "no root may time out waiting for its stage")
}

func clone(td ptrace.Traces) ptrace.Traces {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	return c
}
