// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// agentRecording is one SDK's run of e2e/agents/agent.py against the tiny
// CPU vLLM (make agents-real): the raw OTLP every process sent (its own
// spans and vLLM's llm_request spans of its traces) and the script's own
// clock around each model call, tool call and run.
type agentRecording struct {
	SDK      string            `json:"sdk"`
	Packages map[string]string `json:"packages"`
	Clock    struct {
		Model []clockEntry `json:"model"`
		Tool  []clockEntry `json:"tool"`
		Run   []clockEntry `json:"run"`
	} `json:"clock"`
	batches [][]byte
}

type clockEntry struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Turn  int     `json:"turn"`
}

func (c clockEntry) seconds() float64 { return c.End - c.Start }

// agentRecordings reads e2e/agents/testdata, or the folder a fresh
// make agents-real wrote (INFERPROF_AGENTS_RECORDINGS).
func agentRecordings(t *testing.T) []agentRecording {
	t.Helper()
	dir := os.Getenv("INFERPROF_AGENTS_RECORDINGS")
	if dir == "" {
		dir = filepath.Join(e2etest.RepoRoot(), "e2e", "agents", "testdata")
	}
	metas, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, metas, "no recordings in %s", dir)
	var out []agentRecording
	for _, m := range metas {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		var r agentRecording
		require.NoError(t, json.Unmarshal(b, &r), m)
		f, err := os.Open(strings.TrimSuffix(m, ".json") + ".jsonl")
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				r.batches = append(r.batches, slices.Clone(line))
			}
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
		out = append(out, r)
	}
	return out
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

func checkAgentRecording(t *testing.T, rec agentRecording) {
	ports := e2etest.NewPorts(t)
	data := t.TempDir()
	env := append(defaultEnv(t, ports, data), "INFERPROF_METRICS_FLUSH_INTERVAL=1s")
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: env})
	url := "http://" + ports.Addr("otlp_http") + "/v1/traces"
	for i, b := range rec.batches {
		resp, err := http.Post(url, "application/json", bytes.NewReader(b)) //nolint:noctx // a test against loopback
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, "batch %d", i)
	}

	// The top runs (one per turn of agent.py) leave with their figures
	// after agents.wait.
	var spans []goldenSpan
	var tops []goldenSpan
	require.Eventually(t, func() bool {
		spans = readTraceFile(t, filepath.Join(data, "inferprof-traces.jsonl"))
		tops = topRuns(spans)
		return len(tops) >= len(rec.Clock.Run)
	}, 60*time.Second, 200*time.Millisecond, "agent runs with figures")
	require.Len(t, tops, len(rec.Clock.Run))
	engine := engineRequests(t, rec)
	for i, top := range tops {
		clk := rec.Clock.Run[i]
		a := top.Attributes
		t.Logf("%s turn %d: %s %.3fs model %.3f tools %.3f other %.3f bottleneck %v queue %v prefill %v decode %v",
			rec.SDK, i+1, top.Name, top.duration(), a["inferprof.agent.time_in_model"], a["inferprof.agent.time_in_tools"],
			a["inferprof.agent.time_in_other"], a["inferprof.agent.bottleneck"], a["inferprof.agent.time_in_queue"],
			a["inferprof.agent.time_in_prefill"], a["inferprof.agent.time_in_decode"])
		model, tools, other := attrNum(a["inferprof.agent.time_in_model"]), attrNum(a["inferprof.agent.time_in_tools"]), attrNum(a["inferprof.agent.time_in_other"])
		assert.InDelta(t, top.duration(), model+tools+other, 1e-6, "model + tools + other = the run")
		// The script's clock: the run's span lies inside the clock around
		// Runner.run / graph.invoke (the first run of a process also pays
		// the SDK's start-up before its trace begins); each HTTP call lies
		// inside its model call and each tool body inside its tool call, so
		// they bound model and tool time from below. What the SDK spends
		// around them (building the request, parsing, its thread pool) is
		// logged: the measured share of the SDK in "model".
		calls, toolRuns := clockWithin(rec.Clock.Model, clk), clockWithin(rec.Clock.Tool, clk)
		require.NotEmpty(t, calls)
		require.NotEmpty(t, toolRuns)
		const eps = 0.005
		assert.LessOrEqual(t, top.duration(), clk.seconds()+eps, "run inside the script's clock")
		assert.Greater(t, top.duration(), clk.seconds()-0.3, "run against the script's clock")
		assert.GreaterOrEqual(t, model, sumSeconds(calls)-eps, "model time holds every HTTP call")
		assert.GreaterOrEqual(t, tools, sumSeconds(toolRuns)-eps, "tool time holds every tool body")
		assert.LessOrEqual(t, model+tools, clk.seconds()+eps)
		t.Logf("%s turn %d: clock run %.3f, HTTP %.3f (SDK around it %.3f), tool bodies %.3f (SDK around them %.3f)",
			rec.SDK, i+1, clk.seconds(), sumSeconds(calls), model-sumSeconds(calls), sumSeconds(toolRuns), tools-sumSeconds(toolRuns))
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
		want := kindOfLongest(calls, toolRuns)
		got := childByName(spans, run, run.Attributes["inferprof.agent.bottleneck"].(string))
		assert.Equal(t, want, spanRole(got), "%s: bottleneck %q", run.Name, got.Name)

		// Every call reached the engine: its llm_request's own latencies.
		reqs := engine[top.TraceID]
		require.Len(t, reqs, len(calls), "llm_request spans in the trace")
		var q, p, d float64
		for _, r := range reqs {
			q += r.queue
			p += r.prefill
			d += r.decode
		}
		assert.EqualValues(t, len(calls), a["inferprof.agent.engine_calls"])
		assert.InDelta(t, q, attrNum(a["inferprof.agent.time_in_queue"]), 1e-6)
		assert.InDelta(t, p, attrNum(a["inferprof.agent.time_in_prefill"]), 1e-6)
		assert.InDelta(t, d, attrNum(a["inferprof.agent.time_in_decode"]), 1e-6)

		// Turns: one per run of the conversation, where the SDK names it.
		if conversational(rec.SDK) {
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
		r, ok := matchRequest(engine[s.TraceID], s)
		require.True(t, ok, "no llm_request inside %s", s.Name)
		assert.InDelta(t, r.queue, attrNum(s.Attributes["inferprof.call.time_in_queue"]), 1e-6)
		assert.InDelta(t, r.prefill, attrNum(s.Attributes["inferprof.call.time_in_prefill"]), 1e-6)
		assert.InDelta(t, r.decode, attrNum(s.Attributes["inferprof.call.time_in_decode"]), 1e-6)
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
			runSum += sp.duration()
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
		assert.Contains(t, strings.Join(batchStrings(rec.batches), ""), prompt)
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

func conversational(sdk string) bool { return sdk != "openai-agents-contrib" }

func attrNum(v any) float64 {
	f, _ := v.(float64)
	return f
}

func readTraceFile(t *testing.T, path string) []goldenSpan {
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
	return flattenSpans(tds...)
}

// topRuns: runs with figures whose parent is no run with figures, in
// start order.
func topRuns(spans []goldenSpan) []goldenSpan {
	runs := map[string]bool{}
	for _, s := range spans {
		if _, ok := s.Attributes["inferprof.agent.time_in_model"]; ok {
			runs[s.SpanID] = true
		}
	}
	var out []goldenSpan
	for _, s := range spans {
		if runs[s.SpanID] && !hasRunAbove(spans, s, runs) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y goldenSpan) int { return strings.Compare(x.Start, y.Start) })
	return out
}

func hasRunAbove(spans []goldenSpan, s goldenSpan, runs map[string]bool) bool {
	byID := map[string]goldenSpan{}
	for _, x := range spans {
		byID[x.SpanID] = x
	}
	for p, seen := s.ParentSpanID, 0; p != "" && seen < 64; seen++ {
		if runs[p] {
			return true
		}
		up, ok := byID[p]
		if !ok {
			return false
		}
		p = up.ParentSpanID
	}
	return false
}

// childByName is the span named name under run, looking through spans that
// are not runs (chains, graph nodes), as the bottleneck is defined.
func childByName(spans []goldenSpan, run goldenSpan, name string) goldenSpan {
	for _, s := range spans {
		if s.Name == name && s.TraceID == run.TraceID && under(spans, s, run.SpanID) {
			return s
		}
	}
	return goldenSpan{}
}

func childRun(spans []goldenSpan, run goldenSpan, name string) (goldenSpan, bool) {
	c := childByName(spans, run, name)
	if _, ok := c.Attributes["inferprof.agent.time_in_model"]; ok && c.SpanID != run.SpanID {
		return c, true
	}
	return goldenSpan{}, false
}

func under(spans []goldenSpan, s goldenSpan, ancestor string) bool {
	byID := map[string]goldenSpan{}
	for _, x := range spans {
		byID[x.SpanID] = x
	}
	for p, seen := s.ParentSpanID, 0; p != "" && seen < 64; seen++ {
		if p == ancestor {
			return true
		}
		up, ok := byID[p]
		if !ok {
			return false
		}
		p = up.ParentSpanID
	}
	return false
}

// spanRole says model or tool from the attributes each instrumentation
// writes (gen_ai.operation.name, OpenInference's span kind).
func spanRole(s goldenSpan) string {
	switch s.Attributes["gen_ai.operation.name"] {
	case "execute_tool":
		return "tool"
	case "chat", "text_completion", "generate_content":
		return "model"
	}
	switch s.Attributes["openinference.span.kind"] {
	case "TOOL":
		return "tool"
	case "LLM":
		return "model"
	}
	return fmt.Sprintf("neither (%q)", s.Name)
}

func kindOfLongest(calls, tools []clockEntry) string {
	var m, tl float64
	for _, c := range calls {
		m = max(m, c.seconds())
	}
	for _, c := range tools {
		tl = max(tl, c.seconds())
	}
	if tl > m {
		return "tool"
	}
	return "model"
}

func clockWithin(all []clockEntry, run clockEntry) []clockEntry {
	var out []clockEntry
	for _, c := range all {
		if c.Start >= run.Start && c.End <= run.End {
			out = append(out, c)
		}
	}
	return out
}

func sumSeconds(cs []clockEntry) float64 {
	var s float64
	for _, c := range cs {
		s += c.seconds()
	}
	return s
}

// enginePhases is one llm_request as vLLM wrote it.
type enginePhases struct {
	start, end             time.Time
	queue, prefill, decode float64
}

// engineRequests reads vLLM's llm_request spans from the recording itself,
// not from the collector's output: the engine's own figures.
func engineRequests(t *testing.T, rec agentRecording) map[string][]enginePhases {
	t.Helper()
	out := map[string][]enginePhases{}
	for _, b := range rec.batches {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		require.NoError(t, err)
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if s.Name() != "llm_request" {
						continue
					}
					f := func(k string) float64 {
						v, ok := s.Attributes().Get(k)
						require.True(t, ok, "llm_request without %s", k)
						return v.Double()
					}
					out[s.TraceID().String()] = append(out[s.TraceID().String()], enginePhases{
						start: s.StartTimestamp().AsTime(), end: s.EndTimestamp().AsTime(),
						queue: f("gen_ai.latency.time_in_queue"), prefill: f("gen_ai.latency.time_in_model_prefill"),
						decode: f("gen_ai.latency.time_in_model_decode"),
					})
				}
			}
		}
	}
	return out
}

func matchRequest(reqs []enginePhases, call goldenSpan) (enginePhases, bool) {
	from, err1 := time.Parse(time.RFC3339Nano, call.Start)
	to, err2 := time.Parse(time.RFC3339Nano, call.End)
	if err1 != nil || err2 != nil {
		return enginePhases{}, false
	}
	for _, r := range reqs {
		if !r.start.Before(from) && !r.end.After(to) {
			return r, true
		}
	}
	return enginePhases{}, false
}
