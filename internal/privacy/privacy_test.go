// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const secret = "SECRET-PROMPT tell me a story"

func TestIsContentKey(t *testing.T) {
	for _, k := range []string{
		"gen_ai.prompt", "gen_ai.prompt.0.content", "gen_ai.completion.1.role",
		"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
		"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.tool.definitions",
		"llm.prompts", "llm.input_messages.0.message.content", "llm.prompt_template.variables",
		"input.value", "output.value", "traceloop.entity.input",
		"GEN_AI.PROMPT.0.content", "Gen_AI.Input.Messages",
	} {
		assert.True(t, IsContentKey(k), k)
	}
	for _, k := range []string{
		"gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens", "gen_ai.input.messages.count",
		"gen_ai.request.model", "llm.token_count.prompt", "exception.message", "hw.id",
		"input.mime_type", "gen_ai.latency.time_to_first_token",
	} {
		assert.False(t, IsContentKey(k), k)
	}
}

func TestIsContentEvent(t *testing.T) {
	for _, n := range []string{"gen_ai.user.message", "gen_ai.developer.message", "gen_ai.choice", "gen_ai.client.inference.operation.details"} {
		assert.True(t, IsContentEvent(n), n)
	}
	for _, n := range []string{"exception", "kv_cache_transfer_start", "gen_ai.choice.count"} {
		assert.False(t, IsContentEvent(n), n)
	}
}

func TestMatcherEdges(t *testing.T) {
	all := NewMatcher([]string{"*"})
	assert.True(t, all.Match(""))
	assert.True(t, all.Match("anything"))
	none := NewMatcher(nil)
	assert.False(t, none.Match(""))
	assert.False(t, none.Match("gen_ai.prompt"))
	m := NewMatcher([]string{"ab*", "abcd", "x"})
	for key, want := range map[string]bool{
		"a": false, "ab": true, "abx": true, "AB": true, "abcd": true, "ABCD": true, "abce": true,
		"x": true, "X": true, "xy": false, "b": false,
	} {
		assert.Equal(t, want, m.Match(key), key)
	}
}

func TestValidatePatterns(t *testing.T) {
	require.NoError(t, ValidatePatterns("attributes", Attributes))
	require.NoError(t, ValidatePatterns("events", Events))
	assert.ErrorContains(t, ValidatePatterns("attributes", []string{"*"}), `attributes: pattern "*" matches everything`)
	assert.ErrorContains(t, ValidatePatterns("events", []string{"gen_ai.*.message"}), `events: pattern "gen_ai.*.message" may only end in *`)
}

func TestSpan(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.Attributes().PutStr("gen_ai.prompt", secret)
	s.Attributes().PutInt("gen_ai.usage.prompt_tokens", 3)
	s.Events().AppendEmpty().SetName("gen_ai.user.message")
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.Attributes().PutStr("gen_ai.completion", secret)
	e.Attributes().PutStr("exception.type", "E")
	s.Links().AppendEmpty().Attributes().PutStr("input.value", secret)

	r := DefaultScrubber().Traces(td)
	assert.Equal(t, Removed{Attributes: 3, Events: 1}, r)
	assert.Equal(t, 1, s.Attributes().Len())
	assert.Equal(t, 1, s.Events().Len())
	assert.Equal(t, 1, s.Events().At(0).Attributes().Len())
	assert.Equal(t, 0, s.Links().At(0).Attributes().Len())
	assert.NotContains(t, dumpTraces(t, td), "SECRET")
}

// TestLogs uses the shapes the OpenAI instrumentation and util-genai emit
// (see the Events comment for the files): a map body under event_name, a
// string body under the older event.name attribute, the
// inference.operation.details record with structured message attributes,
// and an ordinary log that must stay as it is.
func TestLogs(t *testing.T) {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()

	user := lrs.AppendEmpty()
	user.SetEventName("gen_ai.user.message")
	user.Attributes().PutStr("gen_ai.system", "openai")
	user.Body().SetEmptyMap().PutStr("content", secret)

	choice := lrs.AppendEmpty()
	choice.SetEventName("gen_ai.choice")
	cb := choice.Body().SetEmptyMap()
	cb.PutInt("index", 0)
	cb.PutStr("finish_reason", "stop")
	msg := cb.PutEmptyMap("message")
	msg.PutStr("role", "assistant")
	tc := msg.PutEmptySlice("tool_calls").AppendEmpty().SetEmptyMap()
	tc.PutEmptyMap("function").PutStr("arguments", secret)

	old := lrs.AppendEmpty()
	old.Attributes().PutStr(EventNameAttribute, "gen_ai.system.message")
	old.Body().SetStr(`{"content":"` + secret + `"}`)

	details := lrs.AppendEmpty()
	details.SetEventName("gen_ai.client.inference.operation.details")
	details.Attributes().PutStr("gen_ai.request.model", "llama")
	in := details.Attributes().PutEmptySlice("gen_ai.input.messages").AppendEmpty().SetEmptyMap()
	in.PutStr("role", "user")
	in.PutEmptySlice("parts").AppendEmpty().SetEmptyMap().PutStr("content", secret)

	plain := lrs.AppendEmpty()
	plain.Body().SetStr("XID error 79")
	plain.Attributes().PutStr("hw.id", "0")
	plain.Attributes().PutStr("gen_ai.prompt", secret)

	mapBody := lrs.AppendEmpty()
	mapBody.Body().SetEmptyMap().PutStr("gen_ai.completion", secret)
	mapBody.Body().Map().PutStr("level", "info")

	r := DefaultScrubber().Logs(ld)
	assert.Equal(t, Removed{Attributes: 3, Bodies: 3}, r)
	for _, lr := range []plog.LogRecord{user, choice, old} {
		assert.Equal(t, pcommon.ValueTypeEmpty, lr.Body().Type())
	}
	assert.Equal(t, "openai", user.Attributes().AsRaw()["gen_ai.system"], "event metadata stays")
	assert.Equal(t, map[string]any{"gen_ai.request.model": "llama"}, details.Attributes().AsRaw())
	assert.Equal(t, "XID error 79", plain.Body().Str())
	assert.Equal(t, map[string]any{"hw.id": "0"}, plain.Attributes().AsRaw())
	assert.Equal(t, map[string]any{"level": "info"}, mapBody.Body().Map().AsRaw())
	assert.NotContains(t, dumpLogs(t, ld), "SECRET")

	// Nothing left: a second pass removes nothing.
	assert.Equal(t, Removed{}, DefaultScrubber().Logs(ld))
}

func TestMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	g.Attributes().PutStr("gen_ai.prompt", secret)
	g.Attributes().PutStr("gen_ai.request.model", "llama")
	g.Exemplars().AppendEmpty().FilteredAttributes().PutStr("input.value", secret)
	ms.AppendEmpty().SetEmptySum().DataPoints().AppendEmpty().Attributes().PutStr("gen_ai.completion", secret)
	ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty().Attributes().PutStr("gen_ai.input.messages", secret)
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty().Attributes().PutStr("gen_ai.output.messages", secret)
	ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty().Attributes().PutStr("llm.prompts", secret)

	r := DefaultScrubber().Metrics(md)
	assert.Equal(t, Removed{Attributes: 6}, r)
	assert.Equal(t, map[string]any{"gen_ai.request.model": "llama"}, g.Attributes().AsRaw())
	var m pmetric.JSONMarshaler
	b, err := m.MarshalMetrics(md)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "SECRET")
}

// TestMapWithoutContentAllocatesNothing: most maps carry no content; for them
// a scrub is one walk of the keys, no edit, no allocation.
func TestMapWithoutContentAllocatesNothing(t *testing.T) {
	m := pcommon.NewMap()
	for _, k := range []string{"gen_ai.latency.e2e", "gen_ai.usage.prompt_tokens", "gen_ai.request.id", "http.route"} {
		m.PutStr(k, "v")
	}
	s := DefaultScrubber()
	allocs := testing.AllocsPerRun(100, func() {
		if s.Map(m) != 0 {
			t.Fatal("removed something")
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 4, m.Len())
}

func dumpTraces(t *testing.T, td ptrace.Traces) string {
	t.Helper()
	var m ptrace.JSONMarshaler
	b, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return string(b)
}

func dumpLogs(t *testing.T, ld plog.Logs) string {
	t.Helper()
	var m plog.JSONMarshaler
	b, err := m.MarshalLogs(ld)
	require.NoError(t, err)
	return string(b)
}

// TestDocsListEveryName keeps docs/privacy.md, where users read the list,
// in step with the list itself.
func TestDocsListEveryName(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "privacy.md"))
	require.NoError(t, err)
	for _, p := range slices.Concat(Attributes, Events, ErrorTextAttributes, []string{ErrorTextMarker}) {
		assert.Containsf(t, string(b), "`"+p+"`", "docs/privacy.md does not list %s", p)
	}
}
