// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/goldentest"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/privacy"
)

// recordedOrder is one way the recorded requests reach the processor.
type recordedOrder struct {
	name    string
	batches []ptrace.Traces
}

// recordedOrders: as recorded; reversed; every order of the batches split
// by resource; and the batches split by resource and scope (the httpx
// spans apart from the instrumentation's), as recorded, reversed and in
// shuffled orders (every order of up to 9 pieces is too many to run).
func recordedOrders(rec agentrecording.Recording) []recordedOrder {
	rev := func(tds []ptrace.Traces) []ptrace.Traces {
		out := append([]ptrace.Traces(nil), tds...)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	out := []recordedOrder{{"recorded", rec.Batches}, {"reversed", rev(rec.Batches)}}
	for i, p := range permuteTraces(splitByResource(rec.Batches)) {
		out = append(out, recordedOrder{fmt.Sprintf("by resource/order %d", i), p})
	}
	pieces := splitByScope(rec.Batches)
	out = append(out, recordedOrder{"by scope/recorded", pieces}, recordedOrder{"by scope/reversed", rev(pieces)})
	r := rand.New(rand.NewPCG(29, 2)) //nolint:gosec // a fixed shuffle, not a secret
	for i := range 20 {
		p := append([]ptrace.Traces(nil), pieces...)
		r.Shuffle(len(p), func(a, b int) { p[a], p[b] = p[b], p[a] })
		out = append(out, recordedOrder{fmt.Sprintf("by scope/shuffle %d", i), p})
	}
	return out
}

// TestAgentsRecordedInput replays each real SDK's recording through
// privacy, inference and agent_run, in every order above, and holds the
// output against the recording's own data: the script's clock and vLLM's
// own llm_request spans, never against the processor's reading.
//
// And against a golden file: in the recorded order the output is
// testdata/golden/recorded_<sdk>.yaml (-update rewrites it); in every other
// order it is the same but for the token_share costs, which depend on the
// order (testdata/README.md): every other figure, attribute and span is
// the same whatever the order.
func TestAgentsRecordedInput(t *testing.T) {
	for _, rec := range loadRecordings(t) {
		engine := engineRequests(t, rec)
		file := "recorded_" + rec.SDK
		// Read once, after the recorded order's run (-update writes it).
		var want ptrace.Traces
		var haveWant bool
		for i, o := range recordedOrders(rec) {
			t.Run(rec.SDK+"/"+o.name, func(t *testing.T) {
				got := replay(t, agentGoldenConfig(), o.batches, true)
				checkRecordedRuns(t, rec, engine, agentrecording.Flatten(got...))
				if i == 0 {
					checkGolden(t, file, got)
					return
				}
				if !haveWant {
					want = goldentest.Read(t, goldenPath(file))
					haveWant = true
				}
				require.NoError(t, ptracetest.CompareTraces(want, goldentest.Merge(got...), append(goldentest.Options(),
					ptracetest.IgnoreSpanAttributeValue(names.AttrRequestCost), ptracetest.IgnoreSpanAttributeValue(names.AttrAgentCost))...))
			})
		}
	}
}

// checkRecordedRuns holds one replay's output against the recording.
func checkRecordedRuns(t *testing.T, rec agentrecording.Recording, engine map[string][]agentrecording.EngineRequest, spans []agentrecording.Span) {
	t.Helper()
	byID := agentrecording.ByID(spans)
	raw := agentrecording.Flatten(rec.Batches...)
	rawByID := agentrecording.ByID(raw)
	tops := agentrecording.TopRuns(spans)
	require.Len(t, tops, len(rec.Clock.Run), "one top run per Runner.run / graph.invoke")
	var prev agentrecording.Span
	for i, top := range tops {
		clk := rec.Clock.Run[i]
		a := top.Attributes
		d := spanSeconds(t, top)
		model, tools, other := attrNum(a[names.AttrAgentTimeInModel]), attrNum(a[names.AttrAgentTimeInTools]), attrNum(a[names.AttrAgentTimeInOther])
		assert.InDelta(t, d, model+tools+other, 1e-6, "%s: model + tools + other = the run", top.Name)

		// The script's clock, with the bound TestAgentsRecorded uses: the
		// run's span lies inside the clock around Runner.run / graph.invoke;
		// each HTTP call inside its model call and each tool body inside its
		// tool call bound model and tool time from below.
		calls, toolRuns := agentrecording.ClockWithin(rec.Clock.Model, clk), agentrecording.ClockWithin(rec.Clock.Tool, clk)
		require.NotEmpty(t, calls)
		require.NotEmpty(t, toolRuns)
		const eps = 0.005
		assert.LessOrEqual(t, d, clk.Seconds()+eps, "run inside the script's clock")
		assert.Greater(t, d, clk.Seconds()-0.3, "run against the script's clock")
		assert.GreaterOrEqual(t, model, agentrecording.SumSeconds(calls)-eps, "model time holds every HTTP call")
		assert.GreaterOrEqual(t, tools, agentrecording.SumSeconds(toolRuns)-eps, "tool time holds every tool body")
		assert.LessOrEqual(t, model+tools, clk.Seconds()+eps)
		// The instrumentation's own model-call and tool spans under the run,
		// as the recording has them (none overlaps another of its kind).
		var spanModel, spanTools float64
		for _, s := range raw {
			if s.TraceID == top.TraceID && agentrecording.Descends(rawByID, s, top.SpanID) {
				switch agentrecording.SpanRole(s) {
				case "model":
					spanModel += spanSeconds(t, s)
				case "tool":
					spanTools += spanSeconds(t, s)
				}
			}
		}
		assert.InDelta(t, spanModel, model, 1e-6, "model time: the model-call spans")
		assert.InDelta(t, spanTools, tools, 1e-6, "tool time: the tool spans")
		assert.EqualValues(t, len(calls), a[names.AttrAgentModelCalls])
		assert.EqualValues(t, len(toolRuns), a[names.AttrAgentToolCalls])
		assert.NotContains(t, a, names.AttrAgentToolErrors, "every tool of agent.py returns")
		assert.NotContains(t, a, names.AttrAgentPartial)

		// The bottleneck: down through the runs it names (the SDK's
		// workflow root names its agent's run, not a call inside it) to the
		// run whose longest child by the clock is the tool or a model call.
		if top.Name == "Agent workflow" {
			c, _ := agentrecording.ChildNamed(spans, byID, top, fmt.Sprint(a[names.AttrAgentBottleneck]))
			assert.True(t, agentrecording.IsRun(c), "the SDK's workflow root: its bottleneck is its agent's run, not a call inside it")
		}
		run := top
		for {
			b, ok := run.Attributes[names.AttrAgentBottleneck].(string)
			require.True(t, ok, "run %s has no bottleneck", run.Name)
			c, found := agentrecording.ChildNamed(spans, byID, run, b)
			require.True(t, found, "%s: bottleneck %q is no span under it", run.Name, b)
			if !agentrecording.IsRun(c) {
				assert.Equal(t, agentrecording.KindOfLongest(calls, toolRuns), agentrecording.SpanRole(c), "%s: bottleneck %q", run.Name, b)
				break
			}
			run = c
		}

		// Every call reached vLLM: the sums of its llm_request spans' own
		// latencies.
		reqs := engine[top.TraceID]
		require.Len(t, reqs, len(calls), "llm_request spans in the trace")
		var q, p, dec float64
		for _, r := range reqs {
			q, p, dec = q+r.Queue, p+r.Prefill, dec+r.Decode
		}
		assert.EqualValues(t, len(calls), a[names.AttrAgentEngineCalls])
		assert.InDelta(t, q, attrNum(a[names.AttrAgentTimeInQueue]), 1e-6)
		assert.InDelta(t, p, attrNum(a[names.AttrAgentTimeInPrefill]), 1e-6)
		assert.InDelta(t, dec, attrNum(a[names.AttrAgentTimeInDecode]), 1e-6)

		// Turns, where the SDK names the conversation; nested runs belong
		// to their top run's turn.
		if rec.Conversational() {
			assert.EqualValues(t, clk.Turn, a[names.AttrAgentTurn], "turn of %s", top.Name)
			if i > 0 {
				_, prevEnd := spanTimes(t, prev)
				start, _ := spanTimes(t, top)
				assert.InDelta(t, start.Sub(prevEnd).Seconds(), a[names.AttrAgentSincePrevTurn], 1e-6)
			} else {
				assert.NotContains(t, a, names.AttrAgentSincePrevTurn)
			}
		} else {
			assert.NotContains(t, a, names.AttrAgentTurn, "the contrib instrumentation exports no conversation id")
		}
		for _, s := range spans {
			if agentrecording.IsRun(s) && s.SpanID != top.SpanID && agentrecording.Descends(byID, s, top.SpanID) {
				assert.NotContains(t, s.Attributes, names.AttrAgentTurn, "nested run %s", s.Name)
			}
		}
		prev = top
	}

	// Each model call gets its own request's queue, prefill and decode, and
	// the rest of the call as other; no other span gets them.
	var chats int
	for _, s := range spans {
		if _, ok := s.Attributes[names.AttrCallTimeInQueue]; !ok {
			continue
		}
		chats++
		assert.Equal(t, "model", agentrecording.SpanRole(s), "%s has a call's phases", s.Name)
		r, ok := agentrecording.MatchRequest(engine[s.TraceID], s)
		require.True(t, ok, "no llm_request inside %s", s.Name)
		a := s.Attributes
		assert.InDelta(t, r.Queue, attrNum(a[names.AttrCallTimeInQueue]), 1e-6)
		assert.InDelta(t, r.Prefill, attrNum(a[names.AttrCallTimeInPrefill]), 1e-6)
		assert.InDelta(t, r.Decode, attrNum(a[names.AttrCallTimeInDecode]), 1e-6)
		assert.InDelta(t, max(0, spanSeconds(t, s)-r.Queue-r.Prefill-r.Decode), attrNum(a[names.AttrCallTimeInOther]), 1e-6)
	}
	assert.Len(t, rec.Clock.Model, chats, "every model call joined to its engine request")
}

func attrNum(v any) float64 {
	f, _ := v.(float64)
	return f
}

// TestAgentsRecordedEngineWait: the call split holds whether engine spans
// wait for their callers (engine_wait) or not, in the recorded and the
// reversed order.
func TestAgentsRecordedEngineWait(t *testing.T) {
	for _, rec := range loadRecordings(t) {
		engine := engineRequests(t, rec)
		for _, o := range recordedOrders(rec)[:2] {
			t.Run(rec.SDK+"/"+o.name, func(t *testing.T) {
				cfg := agentGoldenConfig()
				cfg.Agents.EngineWait = 0
				checkRecordedRuns(t, rec, engine, agentrecording.Flatten(replay(t, cfg, o.batches, true)...))
			})
		}
	}
}

// TestAgentsRecordedWithoutPhaseSpans: with the inference processor's
// phase_spans off, every span but the phase spans leaves as with them on,
// figure for figure (agent_run places the phases from the canonical
// attributes).
func TestAgentsRecordedWithoutPhaseSpans(t *testing.T) {
	for _, rec := range loadRecordings(t) {
		t.Run(rec.SDK, func(t *testing.T) {
			var want []agentrecording.Span
			for _, s := range agentrecording.Flatten(replay(t, agentGoldenConfig(), rec.Batches, true)...) {
				if s.Attributes[names.AttrSynthetic] != true {
					want = append(want, s)
				}
			}
			got := agentrecording.Flatten(replay(t, agentGoldenConfig(), rec.Batches, false)...)
			require.NotEmpty(t, got)
			assert.Equal(t, want, got)
		})
	}
}

// TestAgentsRecordedContentRemoved: the recordings carry agent.py's prompts,
// instructions, tool arguments and results as each instrumentation writes
// them; no content attribute and no prompt leaves the processors.
func TestAgentsRecordedContentRemoved(t *testing.T) {
	m := privacy.NewMatcher(privacy.Attributes)
	for _, rec := range loadRecordings(t) {
		t.Run(rec.SDK, func(t *testing.T) {
			in := 0
			for _, s := range agentrecording.Flatten(rec.Batches...) {
				for k := range s.Attributes {
					if m.Match(k) {
						in++
					}
				}
			}
			require.Positive(t, in, "the recording has content to remove")
			raw := string(joinLines(rec.Lines))
			prompts := []string{"weather in paris", "weather in tokyo"}
			for _, p := range prompts {
				require.Contains(t, raw, p)
			}
			for _, s := range agentrecording.Flatten(replay(t, agentGoldenConfig(), rec.Batches, true)...) {
				for k, v := range s.Attributes {
					assert.False(t, m.Match(k), "%s kept %s", s.Name, k)
					for _, p := range prompts {
						assert.NotContains(t, strings.ToLower(fmt.Sprint(v)), p, "%s: %s carries the prompt", s.Name, k)
					}
				}
			}
		})
	}
}

func joinLines(lines [][]byte) []byte {
	var out []byte
	for _, l := range lines {
		out = append(append(out, l...), '\n')
	}
	return out
}

// withoutEngine is the recording less vLLM's requests: the same agent
// calling a model served by no engine of ours.
func withoutEngine(rec agentrecording.Recording) []ptrace.Traces {
	var out []ptrace.Traces
	for _, td := range splitByResource(rec.Batches) {
		if v, ok := td.ResourceSpans().At(0).Resource().Attributes().Get("service.name"); ok && v.Str() == "vllm" {
			continue
		}
		out = append(out, td)
	}
	return out
}

// TestAgentsRecordedWithoutEngine: where no call reached one of our
// engines, a run has no engine figures and no call a split, and the rest of
// its figures are as with the engine's spans.
func TestAgentsRecordedWithoutEngine(t *testing.T) {
	for _, rec := range loadRecordings(t) {
		t.Run(rec.SDK, func(t *testing.T) {
			batches := withoutEngine(rec)
			require.Less(t, len(batches), len(splitByResource(rec.Batches)), "the recording has vLLM's requests")
			with := map[string]agentrecording.Span{}
			for _, s := range agentrecording.TopRuns(agentrecording.Flatten(replay(t, agentGoldenConfig(), rec.Batches, true)...)) {
				with[s.SpanID] = s
			}
			spans := agentrecording.Flatten(replay(t, agentGoldenConfig(), batches, true)...)
			tops := agentrecording.TopRuns(spans)
			require.Len(t, tops, len(rec.Clock.Run))
			for _, top := range tops {
				a, w := top.Attributes, with[top.SpanID].Attributes
				for _, k := range []string{names.AttrAgentTimeInQueue, names.AttrAgentTimeInPrefill, names.AttrAgentTimeInDecode, names.AttrAgentEngineCalls} {
					assert.NotContains(t, a, k, "no call reached our engine")
				}
				for _, k := range []string{names.AttrAgentTimeInModel, names.AttrAgentTimeInTools, names.AttrAgentTimeInOther, names.AttrAgentModelCalls, names.AttrAgentToolCalls, names.AttrAgentBottleneck, names.AttrAgentTurn} {
					assert.Equal(t, w[k], a[k], k)
				}
			}
			for _, s := range spans {
				assert.NotContains(t, s.Attributes, names.AttrCallTimeInQueue, "%s: no engine request to split by", s.Name)
			}
		})
	}
}
