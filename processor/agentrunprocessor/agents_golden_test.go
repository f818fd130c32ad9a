// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// agentGoldenConfig prices the fixtures' models and the vLLM server's GPU.
func agentGoldenConfig() *Config {
	cfg := goldenConfig()
	price := func(in, cached, out float64) PriceConfig {
		return PriceConfig{Input: &in, CachedInput: &cached, Output: &out, Currency: "USD"}
	}
	cfg.Prices = map[string]PriceConfig{
		"gpt-4o":            price(2.5, 1.25, 10),
		"gpt-4o-2024-08-06": price(2.5, 1.25, 10),
	}
	gpu := 3.5
	cfg.GPUHourPrice = map[string]GPUPriceConfig{"NVIDIA H200": {Price: &gpu, Currency: "USD"}}
	cfg.Cost.GPU = "NVIDIA H200"
	// Engine spans wait for their caller's spans, so their cost carries the
	// caller's agent and user in every order.
	cfg.Agents.EngineWait = 5 * time.Second
	return cfg
}

// agentCases: each instrumentation's conversation. Turn 1's exports (the
// agent's two and, where the calls reached vLLM, the engine's) arrive in
// every order; the turn is released after the wait, then turn 2 arrives.
type agentCase struct {
	name, golden string
	turn1        []string
	turn2        string // "": one turn
}

// The OpenAI Agents SDK (contrib and OpenInference) and LangGraph
// (OpenLLMetry) run on their real recordings (agents_recorded_test.go); the
// hand-built cases left are those no SDK installed here writes
// (testdata/README.md).
var agentCases = []agentCase{
	{"genai semconv", "agents_semconv",
		[]string{"agents_semconv_turn1_a", "agents_semconv_turn1_b", "agents_semconv_turn1_vllm"}, "agents_semconv_turn2"},
}

func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{append([]string(nil), s...)}
	}
	var out [][]string
	for i := range s {
		rest := append(append([]string(nil), s[:i]...), s[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}

// runConversation feeds a case through a processor and returns its output;
// turn2 "" is a case of one turn.
func runConversation(t *testing.T, order []string, turn2 string) []agentrecording.Span {
	t.Helper()
	return agentrecording.Flatten(runConversationPhases(t, order, turn2, true)...)
}

// runConversationPhases is runConversation with the inference processor's
// phase_spans set.
func runConversationPhases(t *testing.T, order []string, turn2 string, phaseSpans bool) []ptrace.Traces {
	t.Helper()
	cfg := agentGoldenConfig()
	h := newHarnessPhases(t, cfg, processortest.NewNopSettings(metadata.Type), phaseSpans)
	for _, b := range order {
		h.consume(t, readBatch(t, b))
	}
	h.now = h.now.Add(cfg.Agents.Wait)
	h.p.expire(t.Context(), h.now)
	if turn2 != "" {
		h.now = h.now.Add(20e9) // the user reads the answer and writes again
		h.consume(t, readBatch(t, turn2))
		h.now = h.now.Add(cfg.Agents.Wait)
		h.p.expire(t.Context(), h.now)
	}
	return h.finishTraces(t)
}

func TestGoldenAgents(t *testing.T) {
	for _, tc := range agentCases {
		for i, order := range permutations(tc.turn1) {
			t.Run(fmt.Sprintf("%s/order %d", tc.name, i), func(t *testing.T) {
				got := runConversationPhases(t, order, tc.turn2, true)
				if i > 0 && *update {
					*update = false
					defer func() { *update = true }()
				}
				checkGolden(t, tc.golden, got)
			})
		}
	}
}

// TestAgentFiguresWithoutPhaseSpans: with the inference processor's
// phase_spans off, agent_run places each engine request's phases from its
// canonical attributes (request.PlacePhases), by the rule the phase spans
// are drawn with: every span but the phase spans leaves as in the golden
// files, figure for figure.
func TestAgentFiguresWithoutPhaseSpans(t *testing.T) {
	for _, tc := range agentCases {
		t.Run(tc.name, func(t *testing.T) {
			var want []agentrecording.Span
			for _, s := range runConversation(t, tc.turn1, tc.turn2) {
				if s.Attributes[names.AttrSynthetic] != true {
					want = append(want, s)
				}
			}
			got := agentrecording.Flatten(runConversationPhases(t, tc.turn1, tc.turn2, false)...)
			require.NotEmpty(t, got)
			assert.Equal(t, want, got)
		})
	}
}

// langchainBatches: the plain LangChain agent's two exports (one trace).
var langchainBatches = []string{"agents_langchain_a", "agents_langchain_b"}

// TestGoldenLangChainAgent: OpenLLMetry's plain LangChain agent
// (AgentExecutor), its two exports in both orders, checked against one
// golden file and, by hand, against the layout.
func TestGoldenLangChainAgent(t *testing.T) {
	for i, order := range permutations(langchainBatches) {
		t.Run(fmt.Sprintf("order %d", i), func(t *testing.T) {
			out := runConversationPhases(t, order, "", true)
			if i > 0 && *update {
				*update = false
				defer func() { *update = true }()
			}
			checkGolden(t, "agents_langchain", out)
			got := agentrecording.Flatten(out...)

			t1 := turn1
			run := spanNamed(t, got, "AgentExecutor.workflow", t1.agent.id).Attributes
			model := dur(t1.call1) + dur(t1.call2)
			tools := t1.tokyo.end - t1.paris.start // the three overlap
			assert.InDelta(t, model, run[names.AttrAgentTimeInModel], 1e-6)
			assert.InDelta(t, tools, run[names.AttrAgentTimeInTools], 1e-6)
			assert.InDelta(t, dur(t1.agent)-model-tools, run[names.AttrAgentTimeInOther], 1e-6)
			assert.EqualValues(t, 2, run[names.AttrAgentModelCalls], "one chat call per plan step, inside its RunnableSequence")
			assert.EqualValues(t, 3, run[names.AttrAgentToolCalls])
			assert.NotContains(t, run, names.AttrAgentToolErrors, "a handled ToolException ends as a success in OpenLLMetry's span")
			assert.Equal(t, "ChatOpenAI.chat", run[names.AttrAgentBottleneck], "the second call (3.2 s) outlasts tokyo (3.0 s); the RunnableSequence around it is looked through")
			assert.NotContains(t, run, names.AttrAgentTurn, "no thread_id: no conversation")
			// gpt-4o: 2.5 in, 1.25 cached, 10 out per 1M tokens.
			cost := (812*2.5 + 64*10 + (1210-768)*2.5 + 768*1.25 + 142*10) / 1e6
			assert.InDelta(t, cost, run[names.AttrAgentCost], 1e-12)
		})
	}
}
