// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// agentRecordings reads e2e/agents/testdata, or the folder a fresh
// make agents-real wrote (INFERPROF_AGENTS_RECORDINGS).
func agentRecordings(t *testing.T) []agentrecording.Recording {
	t.Helper()
	recs, err := agentrecording.Load(agentrecording.Dir(e2etest.RepoRoot()))
	require.NoError(t, err)
	return recs
}

// TestAgentsRecorded replays each real SDK's recording through the built
// binary on config/default.yaml, as sent (OTLP/JSON over HTTP, in the
// order the collector received it), and holds the agent-run figures
// against the script's own clock and the engine's own spans: model, tools
// and other add up to the run; model and tool time match the clock; the
// bottleneck is the longest child by the clock; each call that reached
// vLLM gets its llm_request's queue, prefill and decode; turns count per
// conversation where the instrumentation gives one.
func TestAgentsRecorded(t *testing.T) {
	for _, rec := range agentRecordings(t) {
		t.Run(rec.SDK, func(t *testing.T) {
			t.Parallel()
			checkAgentRecording(t, rec)
		})
	}
}

func checkAgentRecording(t *testing.T, rec agentrecording.Recording) {
	ports := e2etest.NewPorts(t)
	data := t.TempDir()
	env := append(defaultEnv(t, ports, data), "INFERPROF_METRICS_FLUSH_INTERVAL=1s")
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: env})
	url := "http://" + ports.Addr("otlp_http") + "/v1/traces"
	for i, b := range rec.Lines {
		resp, err := http.Post(url, "application/json", bytes.NewReader(b)) //nolint:noctx // a test against loopback
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, "batch %d", i)
	}

	// The top runs (one per turn of agent.py) leave with their figures
	// after agents.wait.
	var spans []agentrecording.Span
	var tops []agentrecording.Span
	require.Eventually(t, func() bool {
		spans = readTraceFile(t, filepath.Join(data, "inferprof-traces.jsonl"))
		tops = agentrecording.TopRuns(spans)
		return len(tops) >= len(rec.Clock.Run)
	}, 60*time.Second, 200*time.Millisecond, "agent runs with figures")
	require.Len(t, tops, len(rec.Clock.Run))
	engine, err := agentrecording.EngineRequests(rec.Batches)
	require.NoError(t, err)
	for i, top := range tops {
		clk := rec.Clock.Run[i]
		a := top.Attributes
		t.Logf("%s turn %d: %s %.3fs model %.3f tools %.3f other %.3f bottleneck %v queue %v prefill %v decode %v",
			rec.SDK, i+1, top.Name, top.Seconds(), a["inferprof.agent.time_in_model"], a["inferprof.agent.time_in_tools"],
			a["inferprof.agent.time_in_other"], a["inferprof.agent.bottleneck"], a["inferprof.agent.time_in_queue"],
			a["inferprof.agent.time_in_prefill"], a["inferprof.agent.time_in_decode"])
		model, tools, other := attrNum(a["inferprof.agent.time_in_model"]), attrNum(a["inferprof.agent.time_in_tools"]), attrNum(a["inferprof.agent.time_in_other"])
		assert.InDelta(t, top.Seconds(), model+tools+other, 1e-6, "model + tools + other = the run")
		// The script's clock: the run's span lies inside the clock around
		// Runner.run / graph.invoke (the first run of a process also pays
		// the SDK's start-up before its trace begins); each HTTP call lies
		// inside its model call and each tool body inside its tool call, so
		// they bound model and tool time from below. What the SDK spends
		// around them (building the request, parsing, its thread pool) is
		// logged: the measured share of the SDK in "model".
		calls, toolRuns := agentrecording.ClockWithin(rec.Clock.Model, clk), agentrecording.ClockWithin(rec.Clock.Tool, clk)
		require.NotEmpty(t, calls)
		require.NotEmpty(t, toolRuns)
		const eps = 0.005
		assert.LessOrEqual(t, top.Seconds(), clk.Seconds()+eps, "run inside the script's clock")
		assert.Greater(t, top.Seconds(), clk.Seconds()-0.3, "run against the script's clock")
		assert.GreaterOrEqual(t, model, agentrecording.SumSeconds(calls)-eps, "model time holds every HTTP call")
		assert.GreaterOrEqual(t, tools, agentrecording.SumSeconds(toolRuns)-eps, "tool time holds every tool body")
		assert.LessOrEqual(t, model+tools, clk.Seconds()+eps)
		t.Logf("%s turn %d: clock run %.3f, HTTP %.3f (SDK around it %.3f), tool bodies %.3f (SDK around them %.3f)",
			rec.SDK, i+1, clk.Seconds(), agentrecording.SumSeconds(calls), model-agentrecording.SumSeconds(calls), agentrecording.SumSeconds(toolRuns), tools-agentrecording.SumSeconds(toolRuns))
		assert.EqualValues(t, len(calls), a["inferprof.agent.model_calls"])
		assert.EqualValues(t, len(toolRuns), a["inferprof.agent.tool_calls"])

		// The bottleneck: the run it wraps, down to the run whose longest
		// child by the clock is the tool (0.6 s of work) or a model call.
		run := top
		for {
			b, ok := run.Attributes["inferprof.agent.bottleneck"].(string)
			require.True(t, ok, "run %s has no bottleneck", run.Name)
			inner, nested := childRun(spans, run, b)
			if !nested {
				break
			}
			run = inner
		}
		want := agentrecording.KindOfLongest(calls, toolRuns)
		got, _ := agentrecording.ChildNamed(spans, agentrecording.ByID(spans), run, run.Attributes["inferprof.agent.bottleneck"].(string))
		assert.Equal(t, want, agentrecording.SpanRole(got), "%s: bottleneck %q", run.Name, got.Name)

		// Every call reached the engine: its llm_request's own latencies.
		reqs := engine[top.TraceID]
		require.Len(t, reqs, len(calls), "llm_request spans in the trace")
		var q, p, d float64
		for _, r := range reqs {
			q += r.Queue
			p += r.Prefill
			d += r.Decode
		}
		assert.EqualValues(t, len(calls), a["inferprof.agent.engine_calls"])
		assert.InDelta(t, q, attrNum(a["inferprof.agent.time_in_queue"]), 1e-6)
		assert.InDelta(t, p, attrNum(a["inferprof.agent.time_in_prefill"]), 1e-6)
		assert.InDelta(t, d, attrNum(a["inferprof.agent.time_in_decode"]), 1e-6)

		// Turns: one per run of the conversation, where the SDK names it.
		if rec.Conversational() {
			assert.EqualValues(t, clk.Turn, a["inferprof.agent.turn"], "turn of %s", top.Name)
		} else {
			assert.NotContains(t, a, "inferprof.agent.turn", "the instrumentation gives no conversation id")
		}
	}
	// Each model call gets its own request's phases.
	var chats int
	for _, s := range spans {
		if _, ok := s.Attributes["inferprof.call.time_in_queue"]; !ok {
			continue
		}
		chats++
		r, ok := agentrecording.MatchRequest(engine[s.TraceID], s)
		require.True(t, ok, "no llm_request inside %s", s.Name)
		assert.InDelta(t, r.Queue, attrNum(s.Attributes["inferprof.call.time_in_queue"]), 1e-6)
		assert.InDelta(t, r.Prefill, attrNum(s.Attributes["inferprof.call.time_in_prefill"]), 1e-6)
		assert.InDelta(t, r.Decode, attrNum(s.Attributes["inferprof.call.time_in_decode"]), 1e-6)
	}
	assert.Len(t, rec.Clock.Model, chats, "every model call joined to its engine request")

	// The connector's run metrics on the shipped Prometheus endpoint: one
	// observation per run with figures (nested runs included), summing
	// their durations.
	var runCount int
	var runSum float64
	for _, sp := range spans {
		if _, ok := sp.Attributes["inferprof.agent.time_in_model"]; ok {
			runCount++
			runSum += sp.Seconds()
		}
	}
	var gotCount, gotSum float64
	require.Eventually(t, func() bool {
		gotCount, gotSum = promTotal(scrapeText(t, ports.Addr("prometheus")), "inferprof_agent_run_duration_seconds")
		return gotCount >= float64(runCount)
	}, 30*time.Second, 200*time.Millisecond, "inferprof_agent_run_duration_seconds on /metrics: %d runs with figures", runCount)
	assert.InDelta(t, float64(runCount), gotCount, 0)
	assert.InDelta(t, runSum, gotSum, 1e-3)

	// The recording holds the prompts agent.py sent; the shipped config
	// writes none of them.
	for _, prompt := range []string{"weather in paris", "weather in tokyo"} {
		assert.Contains(t, strings.Join(batchStrings(rec.Lines), ""), prompt)
		for _, s := range spans {
			for k, v := range s.Attributes {
				assert.NotContains(t, fmt.Sprint(v), prompt, "%s: %s carries the prompt", s.Name, k)
			}
		}
	}
}

// promTotal sums a histogram's _count and _sum series over all labels.
func promTotal(text, name string) (count, sum float64) {
	for _, l := range strings.Split(text, "\n") {
		// Label values hold spaces ("Agent workflow"): the name ends at
		// the first brace or space, the value follows the last brace.
		i := strings.IndexAny(l, "{ ")
		if i <= 0 || strings.HasPrefix(l, "#") {
			continue
		}
		series, rest := l[:i], l[i:]
		if j := strings.LastIndexByte(rest, '}'); j >= 0 {
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		switch series {
		case name + "_count":
			count += v
		case name + "_sum":
			sum += v
		}
	}
	return count, sum
}

func batchStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

func attrNum(v any) float64 {
	f, _ := v.(float64)
	return f
}

func readTraceFile(t *testing.T, path string) []agentrecording.Span {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var tds []ptrace.Traces
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		if err != nil {
			continue // a line being written
		}
		tds = append(tds, td)
	}
	return agentrecording.Flatten(tds...)
}

// childRun is the run named name under run, if the bottleneck names one.
func childRun(spans []agentrecording.Span, run agentrecording.Span, name string) (agentrecording.Span, bool) {
	c, ok := agentrecording.ChildNamed(spans, agentrecording.ByID(spans), run, name)
	if ok && agentrecording.IsRun(c) {
		return c, true
	}
	return agentrecording.Span{}, false
}
