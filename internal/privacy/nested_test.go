// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// mapJSON is m as the Prometheus exporter and the file exporter write it.
func mapJSON(t *testing.T, m pcommon.Map) string {
	t.Helper()
	b, err := json.Marshal(m.AsRaw())
	require.NoError(t, err)
	return string(b)
}

// TestNestedShapes: the shapes issue #30 found leaking, each in attributes,
// and what must stay.
func TestNestedShapes(t *testing.T) {
	for name, build := range map[string]func(m pcommon.Map){
		"kvlist holding a listed key": func(m pcommon.Map) {
			m.PutEmptyMap("gen_ai.request").PutStr("gen_ai.prompt", secret)
		},
		"messages array of role and content": func(m pcommon.Map) {
			msg := m.PutEmptySlice("messages").AppendEmpty().SetEmptyMap()
			msg.PutStr("role", "user")
			msg.PutStr("content", secret)
		},
		"dotted prefix, nested": func(m pcommon.Map) { m.PutEmptyMap("data").PutStr("app.gen_ai.prompt", secret) },
		"parts two levels down": func(m pcommon.Map) {
			m.PutEmptyMap("request").PutEmptySlice("messages").AppendEmpty().SetEmptyMap().
				PutEmptySlice("parts").AppendEmpty().SetEmptyMap().PutStr("text", secret)
		},
		"Vercel AI SDK":          func(m pcommon.Map) { m.PutStr("ai.prompt.messages", secret); m.PutStr("ai.response.toolCalls", secret) },
		"Langfuse":               func(m pcommon.Map) { m.PutStr("langfuse.observation.input", secret) },
		"MLflow":                 func(m pcommon.Map) { m.PutStr("mlflow.spanOutputs", secret) },
		"Logfire":                func(m pcommon.Map) { m.PutStr("all_messages_events", secret) },
		"output token ids":       func(m pcommon.Map) { m.PutEmptySlice("new_token_ids").AppendEmpty().SetInt(4111) },
		"strands-vllm token ids": func(m pcommon.Map) { m.PutStr("llm.hosted_vllm.prompt_token_ids", secret) },
	} {
		t.Run(name, func(t *testing.T) {
			m := pcommon.NewMap()
			m.PutStr("gen_ai.request.model", "llama")
			m.PutInt("gen_ai.usage.prompt_tokens", 42)
			build(m)
			n := DefaultScrubber().Map(m)
			assert.Positive(t, n)
			out := mapJSON(t, m)
			assert.NotContains(t, out, "SECRET-PROMPT")
			assert.NotContains(t, out, "4111")
			assert.Contains(t, out, "llama")
			v, ok := m.Get("gen_ai.usage.prompt_tokens")
			require.True(t, ok, "token counts stay")
			assert.Equal(t, int64(42), v.Int())
		})
	}
}

// TestNestedKeepsShape: only content goes; a kvlist's other keys and a
// top-level key named like a nested one stay.
func TestNestedKeepsShape(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("content", "top-level content is too generic a key to remove")
	msg := m.PutEmptySlice("messages").AppendEmpty().SetEmptyMap()
	msg.PutStr("role", "user")
	msg.PutStr("content", secret)
	assert.Equal(t, 1, DefaultScrubber().Map(m))
	assert.JSONEq(t, `{"content":"top-level content is too generic a key to remove","messages":[{"role":"user"}]}`, mapJSON(t, m))
}

// TestNestedDepth: a value nested past MaxDepth is emptied, whatever it holds.
func TestNestedDepth(t *testing.T) {
	m := pcommon.NewMap()
	cur := m.PutEmptyMap("deep")
	for range MaxDepth + 4 {
		cur = cur.PutEmptyMap("x")
	}
	cur.PutStr("note", secret)
	assert.Equal(t, 1, DefaultScrubber().Map(m))
	assert.NotContains(t, mapJSON(t, m), "SECRET-PROMPT")
	assert.Contains(t, mapJSON(t, m), `"x"`, "the shallow levels stay")
}

func TestNestedSignals(t *testing.T) {
	s := DefaultScrubber()

	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	ev := span.Events().AppendEmpty()
	ev.SetName("ai.stream.firstChunk")
	ev.Attributes().PutEmptyMap("payload").PutStr("ai.response.text", secret)
	s.Traces(td)
	assert.NotContains(t, mapJSON(t, ev.Attributes()), "SECRET-PROMPT", "span event attributes")

	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	lr := lrs.AppendEmpty()
	lr.Body().SetEmptyMap().PutEmptyMap("data").PutStr("gen_ai.prompt", secret)
	lr.Attributes().PutEmptySlice("history").AppendEmpty().SetEmptyMap().PutStr("content", secret)
	arr := lrs.AppendEmpty()
	arr.Body().SetEmptySlice().AppendEmpty().SetEmptyMap().PutStr("text", secret)
	s.Logs(ld)
	assert.NotContains(t, mapJSON(t, lr.Body().Map()), "SECRET-PROMPT", "log body")
	assert.NotContains(t, mapJSON(t, lr.Attributes()), "SECRET-PROMPT", "log attributes")
	assert.NotContains(t, arr.Body().AsString(), "SECRET-PROMPT", "array log body")
}

// TestLabelsDropComposites: on metrics a kvlist, array or bytes value becomes
// no label, whatever its key; scalars stay.
func TestLabelsDropComposites(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vllm")
	rm.Resource().Attributes().PutEmptyMap("app.config").PutStr("system", secret)
	dp := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptySum().DataPoints().AppendEmpty()
	dp.Attributes().PutStr("gen_ai.request.model", "llama")
	dp.Attributes().PutEmptySlice("tags").AppendEmpty().SetStr(secret)
	dp.Attributes().PutEmptyBytes("blob").FromRaw([]byte(secret))
	dp.Attributes().PutEmptyMap("ctx").PutStr("user", "ada")
	r := DefaultScrubber().Metrics(md)
	assert.Equal(t, 4, r.Attributes)
	assert.Equal(t, map[string]any{"gen_ai.request.model": "llama"}, dp.Attributes().AsRaw())
	assert.Equal(t, map[string]any{"service.name": "vllm"}, rm.Resource().Attributes().AsRaw())
	assert.False(t, strings.Contains(mapJSON(t, dp.Attributes()), "SECRET"))
}
