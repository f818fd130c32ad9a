// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/privacy"
	"github.com/inferprof/inferprof/internal/spanfixture"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadatatest"
)

func dur(s agentStep) float64 { return s.end - s.start }

// spanByName finds the output span of a given name and id suffix.
func spanNamed(t *testing.T, got []agentrecording.Span, name, id string) agentrecording.Span {
	t.Helper()
	for _, s := range got {
		if s.Name == name && s.SpanID == id {
			return s
		}
	}
	require.Failf(t, "span not found", "%s %s", name, id)
	return agentrecording.Span{}
}

// TestAgentFiguresByHand checks the golden figures against the fixtures'
// layout, computed here from the layout itself. The shapes agent.py's
// recordings do not have are here: tools in parallel, a failing tool, an
// agent used as a tool.
func TestAgentFiguresByHand(t *testing.T) {
	t1, t2 := turn1, turn2
	model1 := dur(t1.call1) + dur(t1.call2)
	// The three tools overlap: paris and get_time lie within [paris.start, tokyo.end].
	tools1 := t1.tokyo.end - t1.paris.start
	// The research agent's search embeds its query: a model call.
	model2 := dur(t2.call1) + dur(t2.innerCall1) + dur(t2.innerCall2) + dur(t2.call2) + 0.1
	tools2 := dur(t2.research) - dur(t2.innerCall1) - dur(t2.innerCall2) - 0.1
	for _, tc := range agentCases {
		t.Run(tc.name, func(t *testing.T) {
			got := runConversation(t, tc.turn1, tc.turn2)
			run1 := spanNamed(t, got, "invoke_agent Weather agent", t1.agent.id)
			run2 := spanNamed(t, got, "invoke_agent Travel agent", t2.agent.id)
			inner := spanNamed(t, got, "invoke_agent Research agent", t2.inner.id)
			a := run1.Attributes
			assert.InDelta(t, model1, a[names.AttrAgentTimeInModel], 1e-6)
			assert.InDelta(t, tools1, a[names.AttrAgentTimeInTools], 1e-6)
			assert.InDelta(t, dur(t1.agent)-model1-tools1, a[names.AttrAgentTimeInOther], 1e-6)
			assert.EqualValues(t, 2, a[names.AttrAgentModelCalls])
			assert.EqualValues(t, 3, a[names.AttrAgentToolCalls])
			assert.EqualValues(t, 1, a[names.AttrAgentToolErrors], "the failed get_time call")
			e := turn1Engine
			assert.InDelta(t, e[0].queue+e[1].queue, a[names.AttrAgentTimeInQueue], 1e-6)
			assert.InDelta(t, e[0].prefill+e[1].prefill, a[names.AttrAgentTimeInPrefill], 1e-6)
			assert.InDelta(t, e[0].decode+e[1].decode, a[names.AttrAgentTimeInDecode], 1e-6)
			assert.EqualValues(t, 2, a[names.AttrAgentEngineCalls])
			a = run2.Attributes
			assert.InDelta(t, model2, a[names.AttrAgentTimeInModel], 1e-6)
			assert.InDelta(t, tools2, a[names.AttrAgentTimeInTools], 1e-6)
			assert.Contains(t, a[names.AttrAgentBottleneck], "research", "the agent used as a tool took longest")
			assert.InDelta(t, dur(t2.innerCall1)+dur(t2.innerCall2), inner.Attributes[names.AttrAgentTimeInModel], 0.1+1e-6)
			assert.EqualValues(t, 1, inner.Attributes[names.AttrAgentToolCalls])
			assert.NotContains(t, inner.Attributes, names.AttrAgentTurn, "a nested run is part of its top run's turn")
		})
	}
}

// spanByID finds an output span by id.
func spanByID(t *testing.T, got []agentrecording.Span, id string) agentrecording.Span {
	t.Helper()
	for _, s := range got {
		if s.SpanID == id {
			return s
		}
	}
	require.Failf(t, "span not found", "%s", id)
	return agentrecording.Span{}
}

// TestCallSplitByHand: each model call that reached vLLM gets that request's
// queue, prefill and decode, and the rest of the call as other, whatever the
// order of the agent's and the engine's batches, held engine spans or not.
func TestCallSplitByHand(t *testing.T) {
	for _, tc := range agentCases {
		if tc.turn1[len(tc.turn1)-1] != tc.golden+"_turn1_vllm" {
			continue
		}
		for _, engineWait := range []time.Duration{0, 5 * time.Second} {
			for i, order := range permutations(tc.turn1) {
				t.Run(fmt.Sprintf("%s/engine_wait %v/order %d", tc.name, engineWait, i), func(t *testing.T) {
					cfg := agentGoldenConfig()
					cfg.Agents.EngineWait = engineWait
					h := newHarness(t, cfg, processortest.NewNopSettings(metadata.Type))
					for _, b := range order {
						h.consume(t, readBatch(t, b))
					}
					h.now = h.now.Add(cfg.Agents.Wait)
					h.p.expire(t.Context(), h.now)
					got := agentrecording.Flatten(h.sink.AllTraces()...)
					for k, step := range []agentStep{turn1.call1, turn1.call2} {
						e := turn1Engine[k]
						a := spanByID(t, got, step.id).Attributes
						assert.InDelta(t, e.queue, a[names.AttrCallTimeInQueue], 1e-6)
						assert.InDelta(t, e.prefill, a[names.AttrCallTimeInPrefill], 1e-6)
						assert.InDelta(t, e.decode, a[names.AttrCallTimeInDecode], 1e-6)
						assert.InDelta(t, max(0, dur(step)-e.queue-e.prefill-e.decode), a[names.AttrCallTimeInOther], 1e-6)
					}
					for _, step := range []agentStep{turn1.paris, turn1.agent} {
						assert.NotContains(t, spanByID(t, got, step.id).Attributes, names.AttrCallTimeInQueue, "only model calls")
					}
					require.NoError(t, h.tp.Shutdown(t.Context()))
				})
			}
		}
	}
}

// TestAgentTurns: the top run of each trace of a conversation is a turn;
// the time since the previous turn is from its end to the next's start.
func TestAgentTurns(t *testing.T) {
	got := runConversation(t, []string{"agents_semconv_turn1_a", "agents_semconv_turn1_b", "agents_semconv_turn1_vllm"}, "agents_semconv_turn2")
	first := spanNamed(t, got, "invoke_agent Weather agent", turn1.agent.id)
	second := spanNamed(t, got, "invoke_agent Travel agent", turn2.agent.id)
	assert.EqualValues(t, 1, first.Attributes[names.AttrAgentTurn])
	assert.NotContains(t, first.Attributes, names.AttrAgentSincePrevTurn)
	assert.EqualValues(t, 2, second.Attributes[names.AttrAgentTurn])
	assert.InDelta(t, turn2.agent.start-turn1.agent.end, second.Attributes[names.AttrAgentSincePrevTurn], 1e-6)
}

// TestAgentsContentRemoved: the fixtures carry messages, system
// instructions, tool arguments and results as each instrumentation writes
// them; none leaves the processor.
func TestAgentsContentRemoved(t *testing.T) {
	m := privacy.NewMatcher(privacy.Attributes)
	cases := append(append([]agentCase(nil), agentCases...),
		agentCase{"openllmetry langchain", "agents_langchain", langchainBatches, ""})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			batches := append([]string(nil), tc.turn1...)
			if tc.turn2 != "" {
				batches = append(batches, tc.turn2)
			}
			in := 0
			for _, b := range batches {
				for _, s := range agentrecording.Flatten(readBatch(t, b)) {
					for k := range s.Attributes {
						if m.Match(k) {
							in++
						}
					}
				}
			}
			require.Positive(t, in, "the fixture has content to remove")
			for _, s := range runConversation(t, tc.turn1, tc.turn2) {
				for k := range s.Attributes {
					assert.False(t, m.Match(k), "%s kept %s", s.Name, k)
				}
			}
		})
	}
}

// oneRun is an agent run with one model call, whose top (a server span)
// arrives only when top is true.
func oneRun(trace byte, top bool) ptrace.Traces {
	b := spanfixture.NewBatch("app", "service.name", "app")
	tid := pcommon.TraceID{15: trace}.String()
	id := func(i byte) string { return pcommon.SpanID{0: trace, 7: i}.String() }
	call := b.Span("chat m", ptrace.SpanKindClient, tid, id(3), id(2), spanfixture.NS(spanfixture.T0+0.1), spanfixture.NS(spanfixture.T0+1))
	spanfixture.Put(call.Attributes(), "gen_ai.operation.name", "chat", "gen_ai.request.model", "m")
	run := b.Span("invoke_agent a", ptrace.SpanKindInternal, tid, id(2), id(1), spanfixture.NS(spanfixture.T0), spanfixture.NS(spanfixture.T0+2))
	spanfixture.Put(run.Attributes(), "gen_ai.operation.name", "invoke_agent", "gen_ai.agent.name", "a")
	if top {
		b.Span("POST /run", ptrace.SpanKindServer, tid, id(1), "", spanfixture.NS(spanfixture.T0-0.01), spanfixture.NS(spanfixture.T0+2.01))
	}
	return b.Traces()
}

func incompleteOpt(reason string) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("reason", reason))}
}

// TestAgentTimeout: a run whose process top never comes is released after
// max_hold with what arrived, marked partial, and counted.
func TestAgentTimeout(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := goldenConfig()
	h := newHarness(t, cfg, metadatatest.NewSettings(tel))
	h.consume(t, oneRun(1, false))
	assert.Zero(t, h.sink.SpanCount(), "held until its trace completes")
	h.now = h.now.Add(cfg.Agents.MaxHold - time.Second)
	h.p.expire(t.Context(), h.now)
	assert.Zero(t, h.sink.SpanCount())
	h.now = h.now.Add(time.Second)
	h.p.expire(t.Context(), h.now)
	require.Equal(t, 2, h.sink.SpanCount())
	got := agentrecording.Flatten(h.sink.AllTraces()...)
	run := spanNamed(t, got, "invoke_agent a", pcommon.SpanID{0: 1, 7: 2}.String())
	assert.Equal(t, "timeout", run.Attributes[names.AttrAgentPartial])
	assert.EqualValues(t, 1, run.Attributes[names.AttrAgentModelCalls])
	dp := incompleteOpt("timeout")
	dp.Value = 1
	metadatatest.AssertEqualProcessorAgentRunIncomplete(t, tel, []metricdata.DataPoint[int64]{dp}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorAgentRunRuns(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, h.tp.Shutdown(t.Context()))
}

// TestAgentEviction: at max_spans the oldest traces are released early,
// marked partial; no span is lost.
func TestAgentEviction(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := goldenConfig()
	cfg.Agents.MaxSpans, cfg.Agents.MaxSpansPerTrace = 8, 8
	h := newHarness(t, cfg, metadatatest.NewSettings(tel))
	in := 0
	for i := byte(1); i <= 10; i++ {
		td := oneRun(i, false)
		in += td.SpanCount()
		h.consume(t, td)
	}
	got := h.finish(t)
	assert.Len(t, got, in, "every span leaves, evicted or drained at shutdown")
	partial := map[any]int{}
	for _, s := range got {
		if s.Name == "invoke_agent a" {
			partial[s.Attributes[names.AttrAgentPartial]]++
		}
	}
	assert.Positive(t, partial["evicted"])
	assert.Positive(t, partial["shutdown"])
	assert.Equal(t, 10, partial["evicted"]+partial["shutdown"])
}

// TestAgentNotHeldWithoutAgent: a model call under a server span, with no
// agent, leaves with its batch's top: nothing to wait for.
func TestAgentNotHeldWithoutAgent(t *testing.T) {
	b := spanfixture.NewBatch("app", "service.name", "app")
	tid := "0102030405060708090a0b0c0d0e0f10"
	call := b.Span("chat m", ptrace.SpanKindClient, tid, "0000000000000002", "0000000000000001", spanfixture.NS(spanfixture.T0+0.1), spanfixture.NS(spanfixture.T0+1))
	spanfixture.Put(call.Attributes(), "gen_ai.operation.name", "chat", "gen_ai.request.model", "m")
	b.Span("POST /chat", ptrace.SpanKindServer, tid, "0000000000000001", "", spanfixture.NS(spanfixture.T0), spanfixture.NS(spanfixture.T0+1.1))
	h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
	h.consume(t, b.Traces())
	assert.Equal(t, 2, h.sink.SpanCount(), "released at the end of the batch")
	require.NoError(t, h.tp.Shutdown(t.Context()))
}

// TestAgentsDisabled: with agents off, GenAI spans pass untouched.
func TestAgentsDisabled(t *testing.T) {
	cfg := goldenConfig()
	cfg.Agents.Enabled = false
	h := newHarness(t, cfg, processortest.NewNopSettings(metadata.Type))
	h.consume(t, oneRun(1, false))
	got := agentrecording.Flatten(h.sink.AllTraces()...)
	require.Len(t, got, 2)
	for _, s := range got {
		assert.NotContains(t, s.Attributes, names.AttrAgentTimeInModel)
	}
	require.NoError(t, h.tp.Shutdown(t.Context()))
}

// TestEngineCostCountedOnce: a self-hosted model also listed in prices is
// priced once per call, whichever of its two spans arrives first, and the
// conflict is counted.
func TestEngineCostCountedOnce(t *testing.T) {
	for _, order := range [][]string{
		{"agents_semconv_turn1_a", "agents_semconv_turn1_b", "agents_semconv_turn1_vllm"},
		{"agents_semconv_turn1_vllm", "agents_semconv_turn1_a", "agents_semconv_turn1_b"},
	} {
		for _, engineWait := range []time.Duration{0, 5 * time.Second} {
			cfg := agentGoldenConfig()
			cfg.Agents.EngineWait = engineWait
			in, out := 1.0, 2.0
			cfg.Prices["Qwen/Qwen3-8B"] = PriceConfig{Input: &in, Output: &out, Currency: "USD"}
			h := newHarness(t, cfg, processortest.NewNopSettings(metadata.Type))
			// The engine batch comes in separate calls, as the engine's
			// exporter would send it, after the agent's were released.
			for _, b := range order {
				h.consume(t, readBatch(t, b))
				h.now = h.now.Add(cfg.Agents.Wait + cfg.Agents.EngineWait)
				h.p.expire(t.Context(), h.now)
			}
			priced := map[string]int{}
			for _, s := range h.finish(t) {
				if _, ok := s.Attributes[names.AttrRequestCost]; ok {
					priced[s.Name]++
				}
			}
			assert.Equal(t, 2, priced["llm_request"]+priced["chat Qwen/Qwen3-8B"], "order %v engine_wait %v: %v", order, engineWait, priced)
		}
	}
}
