// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadatatest"
	"github.com/inferprof/inferprof/internal/names"
)

var agentResource = map[string]any{"service.name": "travel-agent"}

// agentRun is an agent-run span as the inference processor leaves it.
func agentRun(agent string, model, tools, other float64, conv string, turn int64) map[string]any {
	a := map[string]any{
		"gen_ai.operation.name": "invoke_agent", names.AttrAgentName: agent,
		names.AttrAgentTimeInModel: model, names.AttrAgentTimeInTools: tools, names.AttrAgentTimeInOther: other,
	}
	if conv != "" {
		a[names.AttrConversationID] = conv
		a[names.AttrAgentTurn] = turn
	}
	return a
}

// allAttrs renders every attribute of a point, sorted: "k=v,k=v".
func allAttrs(m pcommon.Map) string {
	kv := make([]string, 0, m.Len())
	for k, v := range m.All() {
		kv = append(kv, k+"="+v.AsString())
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func histAll(t *testing.T, md pmetric.Metrics, name string) map[string]pmetric.HistogramDataPoint {
	t.Helper()
	return histPointsBy(t, md, name, allAttrs)
}

func doublePoints(t *testing.T, md pmetric.Metrics, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range metricsNamed(md, name) {
		var dps pmetric.NumberDataPointSlice
		switch m.Type() {
		case pmetric.MetricTypeSum:
			require.True(t, m.Sum().IsMonotonic())
			dps = m.Sum().DataPoints()
		case pmetric.MetricTypeGauge:
			dps = m.Gauge().DataPoints()
		default:
			t.Fatalf("%s is a %s", name, m.Type())
		}
		for i := 0; i < dps.Len(); i++ {
			out[allAttrs(dps.At(i).Attributes())] = dps.At(i).DoubleValue()
		}
	}
	return out
}

func TestAgentRunMetrics(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(agentResource)
	runs := []struct {
		d                   time.Duration
		model, tools, other float64
	}{{9 * time.Second, 5.2, 3.05, 0.75}, {7 * time.Second, 5.6, 0.9, 0.5}}
	for _, r := range runs {
		h.addSpan(spans, "invoke_agent Travel agent", r.d, agentRun("Travel agent", r.model, r.tools, r.other, "", 0))
	}
	failed := h.addSpan(spans, "invoke_agent Travel agent", 2*time.Second, agentRun("Travel agent", 1, 0, 1, "", 0))
	failed.Status().SetCode(ptrace.StatusCodeError)
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)

	d := histAll(t, md, names.MetricAgentRunDuration)
	ok := d["gen_ai.agent.name=Travel agent"]
	assert.EqualValues(t, 2, ok.Count())
	assert.InDelta(t, (runs[0].d + runs[1].d).Seconds(), ok.Sum(), 1e-9)
	assert.EqualValues(t, 1, d["error.type=_OTHER,gen_ai.agent.name=Travel agent"].Count())

	parts := histAll(t, md, names.MetricAgentPartDuration)
	for part, want := range map[string]float64{
		"model": runs[0].model + runs[1].model, "tools": runs[0].tools + runs[1].tools, "other": runs[0].other + runs[1].other,
	} {
		p := parts["gen_ai.agent.name=Travel agent,part="+part]
		assert.EqualValues(t, 2, p.Count(), part)
		assert.InDelta(t, want, p.Sum(), 1e-9, part)
	}
}

// priced is a request span the processor priced.
func priced(model, provider, user, agent, currency string, cost float64, out int64) map[string]any {
	a := map[string]any{names.AttrRequestCost: cost, names.AttrRequestCostCurrency: currency, names.AttrRequestCostMethod: "price_table"}
	for k, v := range map[string]string{names.AttrRequestModel: model, names.AttrProviderName: provider, names.AttrEndUserID: user, names.AttrAgentName: agent} {
		if v != "" {
			a[k] = v
		}
	}
	if out >= 0 {
		a[names.AttrOutputTokens] = out
	}
	return a
}

func TestCostMetrics(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(agentResource)
	h.addSpan(spans, "chat gpt-4o", time.Second, priced("gpt-4o", "openai", "u1", "Travel agent", "USD", 0.002, 100))
	h.addSpan(spans, "chat gpt-4o", time.Second, priced("gpt-4o", "openai", "u1", "Travel agent", "USD", 0.004, 300))
	h.addSpan(spans, "chat gpt-4o", time.Second, priced("gpt-4o", "openai", "u2", "", "USD", 0.001, -1)) // no output count
	// OpenInference names, as the processor leaves them on a client span.
	oi := priced("", "", "", "Research agent", "USD", 0.010, -1)
	oi["llm.model_name"], oi["llm.provider"], oi["user.id"], oi["llm.token_count.completion"] = "gpt-4o", "openai", "u3", int64(500)
	h.addSpan(spans, "response", time.Second, oi)
	// An engine request: a request series and a cost series.
	engine := canonical("Qwen/Qwen3-8B", 0.5, 2, 0.4, 0.1, 1.5, 800, 64)
	for k, v := range priced("Qwen/Qwen3-8B", "vllm", "", "", "EUR", 0.0019, 64) {
		engine[k] = v
	}
	h.addSpan(spans, "llm_request", 2*time.Second, engine)
	h.addSpan(spans, "chat m", time.Second, map[string]any{names.AttrRequestCost: 1.0}) // no currency: not counted
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)

	cost := doublePoints(t, md, names.MetricCost)
	assert.Len(t, cost, 4, "the span without a currency is not counted")
	assert.InDelta(t, 0.006, cost["enduser.id=u1,gen_ai.agent.name=Travel agent,gen_ai.provider.name=openai,gen_ai.request.model=gpt-4o,inferprof.cost.currency=USD"], 1e-12)
	assert.InDelta(t, 0.001, cost["enduser.id=u2,gen_ai.provider.name=openai,gen_ai.request.model=gpt-4o,inferprof.cost.currency=USD"], 1e-12)
	assert.InDelta(t, 0.010, cost["enduser.id=u3,gen_ai.agent.name=Research agent,gen_ai.provider.name=openai,gen_ai.request.model=gpt-4o,inferprof.cost.currency=USD"], 1e-12)
	assert.InDelta(t, 0.0019, cost["gen_ai.provider.name=vllm,gen_ai.request.model=Qwen/Qwen3-8B,inferprof.cost.currency=EUR"], 1e-12)

	per1k := doublePoints(t, md, names.MetricCostPer1kOutput)
	assert.Len(t, per1k, 2)
	assert.InDelta(t, 1000*(0.002+0.004+0.010)/(100+300+500), per1k["gen_ai.request.model=gpt-4o,inferprof.cost.currency=USD"], 1e-12,
		"requests without an output count are left out")
	assert.InDelta(t, 1000*0.0019/64, per1k["gen_ai.request.model=Qwen/Qwen3-8B,inferprof.cost.currency=EUR"], 1e-12)
	assert.Len(t, sumPoints(t, md, names.MetricRequests), 1, "the engine span is a request too")
}

// TestCostDeltaRefused: a refused delta flush keeps the cost interval.
func TestCostDeltaRefused(t *testing.T) {
	sink := &refusingSink{refuse: errors.New("memory limit")}
	h := newHarness(t, func(c *Config) { c.AggregationTemporality = TemporalityDelta })
	h.c.next = sink
	td, spans := batch(agentResource)
	h.addSpan(spans, "chat gpt-4o", time.Second, priced("gpt-4o", "openai", "u1", "a", "USD", 0.25, 10))
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	h.clock.Advance(time.Second)
	h.c.flush(t.Context(), false) // refused
	sink.refuse = nil
	td, spans = batch(agentResource)
	h.addSpan(spans, "chat gpt-4o", time.Second, priced("gpt-4o", "openai", "u1", "a", "USD", 0.5, 10))
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	h.clock.Advance(time.Second)
	h.c.flush(t.Context(), false)
	require.Len(t, sink.AllMetrics(), 1)
	cost := doublePoints(t, sink.AllMetrics()[0], names.MetricCost)
	assert.InDelta(t, 0.75, cost["enduser.id=u1,gen_ai.agent.name=a,gen_ai.provider.name=openai,gen_ai.request.model=gpt-4o,inferprof.cost.currency=USD"], 1e-12)
}

// TestConversationTurns: a conversation's turns are observed once it has
// been idle for conversations.idle.
func TestConversationTurns(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Conversations.Idle = time.Minute })
	send := func(conv string, turn int64) {
		td, spans := batch(agentResource)
		h.addSpan(spans, "invoke_agent a", time.Second, agentRun("a", 1, 0, 0, conv, turn))
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	}
	send("c1", 1)
	send("c1", 2)
	send("c2", 1)
	send("c1", 3)
	md := h.flush(t, 30*time.Second)
	assert.Empty(t, metricsNamed(md, names.MetricAgentTurns), "both still active")
	md = h.flush(t, 31*time.Second)
	turns := histAll(t, md, names.MetricAgentTurns)["gen_ai.agent.name=a"]
	assert.EqualValues(t, 2, turns.Count())
	assert.InDelta(t, 3+1, turns.Sum(), 1e-9)
}

// TestConversationsBounded: past max_conversations the least recently
// active conversation is observed early, and counted.
func TestConversationsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Conversations.MaxConversations = 2 })
	for i, conv := range []string{"c1", "c2", "c3", "c4"} {
		td, spans := batch(agentResource)
		h.addSpan(spans, "invoke_agent a", time.Second, agentRun("a", 1, 0, 0, conv, int64(i+1)))
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	}
	md := h.flush(t, time.Second)
	turns := histAll(t, md, names.MetricAgentTurns)["gen_ai.agent.name=a"]
	assert.EqualValues(t, 2, turns.Count(), "c1 and c2 made room")
	assert.InDelta(t, 1+2, turns.Sum(), 1e-9)
	metadatatest.AssertEqualConnectorInferenceMetricsConversationsEarly(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	assert.Len(t, h.c.convs.m, 2)
	assert.Len(t, h.c.convs.resources, 1)
}
