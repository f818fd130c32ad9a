// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrecording

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// The committed recordings load whole: every line decoded, a clock entry
// per run, and vLLM's requests with their latencies.
func TestLoadCommitted(t *testing.T) {
	t.Setenv(EnvDir, "")
	recs, err := Load(Dir(filepath.Join("..", "..")))
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	for _, r := range recs {
		assert.NotEmpty(t, r.SDK)
		require.NotEmpty(t, r.Lines, r.SDK)
		assert.Len(t, r.Batches, len(r.Lines), r.SDK)
		assert.NotEmpty(t, r.Clock.Run, r.SDK)
		reqs, err := EngineRequests(r.Batches)
		require.NoError(t, err)
		var n int
		for _, rs := range reqs {
			n += len(rs)
		}
		assert.Len(t, r.Clock.Model, n, "%s: one llm_request per model call", r.SDK)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(t.TempDir())
	require.ErrorContains(t, err, "no recordings")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{"sdk":"x"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.jsonl"), []byte("{\"resourceSpans\":[]}\nnot json\n"), 0o600))
	_, err = Load(dir)
	require.ErrorContains(t, err, "x.jsonl line 2")

	require.NoError(t, os.Remove(filepath.Join(dir, "x.jsonl")))
	_, err = Load(dir)
	require.Error(t, err)
}

func TestDirFromEnv(t *testing.T) {
	t.Setenv(EnvDir, "/some/where")
	assert.Equal(t, "/some/where", Dir("/repo"))
	t.Setenv(EnvDir, "")
	assert.Equal(t, filepath.Join("/repo", "e2e", "agents", "testdata"), Dir("/repo"))
}

// tree: workflow run > agent run > chain > {chat, tool}; the agent run and
// the workflow have figures.
func tree() ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	// On the whole second: RFC 3339 drops the zero fraction, and the
	// order is still by time.
	t0 := time.Unix(100, 0)
	tid := pcommon.TraceID{1}
	add := func(id, parent byte, name string, from, to float64, attrs map[string]any) {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(tid)
		s.SetSpanID(pcommon.SpanID{id})
		if parent != 0 {
			s.SetParentSpanID(pcommon.SpanID{parent})
		}
		s.SetName(name)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(from * float64(time.Second)))))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(to * float64(time.Second)))))
		_ = s.Attributes().FromRaw(attrs)
	}
	// In reverse start order: Flatten sorts.
	add(5, 3, "get_weather", 1.5, 2.1, map[string]any{"gen_ai.operation.name": "execute_tool"})
	add(4, 3, "chat gpt-4o", 0.5, 1.4, map[string]any{"openinference.span.kind": "LLM"})
	add(3, 2, "chain", 0.4, 2.2, nil)
	add(2, 1, "agent", 0.2, 2.5, map[string]any{names.AttrAgentTimeInModel: 0.9})
	add(1, 0, "workflow", 0, 3, map[string]any{names.AttrAgentTimeInModel: 0.9})
	return td
}

func TestSpanWalks(t *testing.T) {
	spans := Flatten(tree())
	require.Len(t, spans, 5)
	for i, want := range []string{"workflow", "agent", "chain", "chat gpt-4o", "get_weather"} {
		assert.Equal(t, want, spans[i].Name, "start order")
	}
	assert.InDelta(t, 3.0, spans[0].Seconds(), 1e-9)

	tops := TopRuns(spans)
	require.Len(t, tops, 1, "the agent run is under the workflow's")
	assert.Equal(t, "workflow", tops[0].Name)

	byID := ByID(spans)
	tool, ok := ChildNamed(spans, byID, spans[1], "get_weather")
	require.True(t, ok, "through the chain")
	assert.Equal(t, "tool", SpanRole(tool))
	chat, ok := ChildNamed(spans, byID, spans[0], "chat gpt-4o")
	require.True(t, ok)
	assert.Equal(t, "model", SpanRole(chat))
	_, ok = ChildNamed(spans, byID, spans[2], "agent")
	assert.False(t, ok, "an ancestor is no child")
	_, ok = ChildNamed(spans, byID, spans[1], "agent")
	assert.False(t, ok, "a run is not its own child")
	assert.Equal(t, `neither ("chain")`, SpanRole(spans[2]))
}

func TestEngineRequests(t *testing.T) {
	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("llm_request")
	s.SetTraceID(pcommon.TraceID{7})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Unix(100, 600_000_000)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Unix(101, 300_000_000)))
	s.Attributes().PutDouble("gen_ai.latency.time_in_queue", 0.01)
	s.Attributes().PutDouble("gen_ai.latency.time_in_model_prefill", 0.1)
	_, err := EngineRequests([]ptrace.Traces{td})
	require.ErrorContains(t, err, "time_in_model_decode")
	s.Attributes().PutDouble("gen_ai.latency.time_in_model_decode", 0.5)
	reqs, err := EngineRequests([]ptrace.Traces{td})
	require.NoError(t, err)
	got := reqs[pcommon.TraceID{7}.String()]
	require.Len(t, got, 1)
	assert.InDelta(t, 0.5, got[0].Decode, 0)

	spans := Flatten(tree())
	r, ok := MatchRequest(got, spans[3]) // chat: 100.5 to 101.4
	require.True(t, ok)
	assert.Equal(t, got[0], r)
	_, ok = MatchRequest(got, spans[4]) // the tool: after it
	assert.False(t, ok)
}

func TestClock(t *testing.T) {
	run := ClockEntry{Start: 10, End: 20}
	calls := []ClockEntry{{Start: 11, End: 12}, {Start: 13, End: 13.5}, {Start: 19, End: 21}}
	tools := []ClockEntry{{Start: 12, End: 13}}
	within := ClockWithin(calls, run)
	require.Len(t, within, 2, "the call that ends after the run is not in it")
	assert.InDelta(t, 1.5, SumSeconds(within), 1e-9)
	assert.Equal(t, "model", KindOfLongest(within, tools), "a tie is the model's")
	assert.Equal(t, "tool", KindOfLongest(within, []ClockEntry{{Start: 12, End: 14}}))
}
