// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// The real SDKs' recordings live in one place, where make agents-real
// writes them and TestAgentsRecorded replays them through the binary
// (e2e/agents/testdata/README.md says why there).
const recordingsDir = "../../e2e/agents/testdata"

// recording is one SDK's run of e2e/agents/agent.py against the tiny CPU
// vLLM: every OTLP request the collector got for its traces, in arrival
// order, and the script's own clock.
type recording struct {
	SDK      string            `json:"sdk"`
	Packages map[string]string `json:"packages"`
	Clock    struct {
		Model []clockEntry `json:"model"`
		Tool  []clockEntry `json:"tool"`
		Run   []clockEntry `json:"run"`
	} `json:"clock"`
	lines   [][]byte        // the requests as sent
	batches []ptrace.Traces // the same, decoded
}

type clockEntry struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Turn  int     `json:"turn"`
}

func (c clockEntry) seconds() float64 { return c.End - c.Start }

// recordingsFolder is recordingsDir, or the folder a fresh make agents-real
// wrote (INFERPROF_AGENTS_RECORDINGS), as TestAgentsRecorded reads it.
func recordingsFolder() string {
	if d := os.Getenv("INFERPROF_AGENTS_RECORDINGS"); d != "" {
		return d
	}
	return recordingsDir
}

func loadRecordings(tb testing.TB) []recording {
	tb.Helper()
	metas, err := filepath.Glob(filepath.Join(recordingsFolder(), "*.json"))
	require.NoError(tb, err)
	require.NotEmpty(tb, metas, "no recordings in %s", recordingsFolder())
	var out []recording
	for _, m := range metas {
		b, err := os.ReadFile(m)
		require.NoError(tb, err)
		var r recording
		require.NoError(tb, json.Unmarshal(b, &r), m)
		r.lines = recordingLines(tb, strings.TrimSuffix(m, ".json")+".jsonl")
		for i, l := range r.lines {
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(l)
			require.NoError(tb, err, "%s line %d", m, i+1)
			r.batches = append(r.batches, td)
		}
		out = append(out, r)
	}
	return out
}

func recordingLines(tb testing.TB, path string) [][]byte {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, slices.Clone(l))
		}
	}
	require.NoError(tb, sc.Err())
	return out
}

// conversational: the contrib instrumentation exports no conversation id,
// the other two do (OpenInference's session.id, the LangGraph thread_id
// agent.py's invoke_agent span carries as gen_ai.conversation.id).
func (r recording) conversational() bool { return r.SDK != "openai-agents-contrib" }

// splitByScope cuts every batch into one batch per resource and scope, in
// their order: spans of one request arriving in separate requests.
func splitByScope(tds []ptrace.Traces) []ptrace.Traces {
	var out []ptrace.Traces
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				one := ptrace.NewTraces()
				ors := one.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(ors.Resource())
				ors.SetSchemaUrl(rs.SchemaUrl())
				ss.CopyTo(ors.ScopeSpans().AppendEmpty())
				out = append(out, one)
			}
		}
	}
	return out
}

// splitByResource cuts every batch into one batch per resource.
func splitByResource(tds []ptrace.Traces) []ptrace.Traces {
	var out []ptrace.Traces
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			one := ptrace.NewTraces()
			rs.CopyTo(one.ResourceSpans().AppendEmpty())
			out = append(out, one)
		}
	}
	return out
}

// permuteTraces is every order of tds.
func permuteTraces(tds []ptrace.Traces) [][]ptrace.Traces {
	idx := make([]string, len(tds))
	for i := range tds {
		idx[i] = string(rune('a' + i))
	}
	var out [][]ptrace.Traces
	for _, p := range permutations(idx) {
		order := make([]ptrace.Traces, len(p))
		for i, k := range p {
			order[i] = tds[k[0]-'a']
		}
		out = append(out, order)
	}
	return out
}

// replay feeds batches through privacy, inference and agent_run in the
// order given, each one ConsumeTraces, then lets the wait pass.
func replay(t *testing.T, cfg *Config, batches []ptrace.Traces, phaseSpans bool) []ptrace.Traces {
	t.Helper()
	h := newHarnessPhases(t, cfg, processortest.NewNopSettings(metadata.Type), phaseSpans)
	for _, b := range batches {
		td := ptrace.NewTraces()
		b.CopyTo(td) // the privacy processor edits in place
		h.consume(t, td)
	}
	h.now = h.now.Add(cfg.Agents.Wait + cfg.Agents.EngineWait)
	h.p.expire(t.Context(), h.now)
	return h.finishTraces(t)
}

// enginePhases is one llm_request as vLLM wrote it in the recording.
type enginePhases struct {
	start, end             int64
	queue, prefill, decode float64
}

// engineRequests reads vLLM's llm_request spans from the recording itself,
// not from the processor's output: the engine's own figures, by trace.
func engineRequests(t *testing.T, rec recording) map[string][]enginePhases {
	t.Helper()
	out := map[string][]enginePhases{}
	for _, td := range rec.batches {
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
					id := s.TraceID().String()
					out[id] = append(out[id], enginePhases{
						start: int64(s.StartTimestamp()), end: int64(s.EndTimestamp()),
						queue: f("gen_ai.latency.time_in_queue"), prefill: f("gen_ai.latency.time_in_model_prefill"),
						decode: f("gen_ai.latency.time_in_model_decode"),
					})
				}
			}
		}
	}
	return out
}

func spanTimes(t *testing.T, s goldenSpan) (start, end time.Time) {
	t.Helper()
	start, err := time.Parse(time.RFC3339Nano, s.Start)
	require.NoError(t, err)
	end, err = time.Parse(time.RFC3339Nano, s.End)
	require.NoError(t, err)
	return start, end
}

func spanSeconds(t *testing.T, s goldenSpan) float64 {
	t.Helper()
	start, end := spanTimes(t, s)
	return end.Sub(start).Seconds()
}

// isRun: the processor gave the span a run's figures.
func isRun(s goldenSpan) bool {
	_, ok := s.Attributes[names.AttrAgentTimeInModel]
	return ok
}

// topRuns are the runs with figures whose ancestors are no run with
// figures, in start order: one per turn of agent.py.
func topRuns(spans []goldenSpan) []goldenSpan {
	byID := spansByID(spans)
	var out []goldenSpan
	for _, s := range spans {
		if !isRun(s) {
			continue
		}
		top := true
		for p, n := s.ParentSpanID, 0; p != "" && n < 64; n++ {
			up, ok := byID[p]
			if !ok {
				break
			}
			if isRun(up) {
				top = false
				break
			}
			p = up.ParentSpanID
		}
		if top {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y goldenSpan) int { return strings.Compare(x.Start, y.Start) })
	return out
}

func spansByID(spans []goldenSpan) map[string]goldenSpan {
	m := make(map[string]goldenSpan, len(spans))
	for _, s := range spans {
		m[s.SpanID] = s
	}
	return m
}

// descends: s descends from ancestor.
func descends(byID map[string]goldenSpan, s goldenSpan, ancestor string) bool {
	for p, n := s.ParentSpanID, 0; p != "" && n < 64; n++ {
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

// childNamed is the span named name under run (through chains and graph
// nodes, as the bottleneck is defined).
func childNamed(spans []goldenSpan, byID map[string]goldenSpan, run goldenSpan, name string) (goldenSpan, bool) {
	for _, s := range spans {
		if s.Name == name && s.SpanID != run.SpanID && descends(byID, s, run.SpanID) {
			return s, true
		}
	}
	return goldenSpan{}, false
}

// spanRole says model or tool from the attributes each instrumentation
// writes (gen_ai.operation.name, OpenInference's span kind), not from the
// processor's reading.
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
	return "neither " + s.Name
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
