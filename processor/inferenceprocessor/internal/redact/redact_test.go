// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package redact

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestMatcher(t *testing.T) {
	m := NewMatcher(DefaultAttributes)
	for key, want := range map[string]bool{
		"gen_ai.prompt": true, "gen_ai.prompt.0.content": true, "gen_ai.completion.1.role": true,
		"gen_ai.input.messages": true, "gen_ai.tool.call.arguments": true, "llm.prompts": true,
		"gen_ai.usage.prompt_tokens": false, "gen_ai.input.messages.count": false, "gen_ai.request.model": false,
	} {
		assert.Equal(t, want, m.Match(key), key)
	}
}

func TestSpan(t *testing.T) {
	s := ptrace.NewSpan()
	s.Attributes().PutStr("gen_ai.prompt", "x")
	s.Attributes().PutInt("gen_ai.usage.prompt_tokens", 3)
	s.Events().AppendEmpty().SetName("gen_ai.user.message")
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.Attributes().PutStr("gen_ai.completion", "y")
	e.Attributes().PutStr("exception.type", "E")
	r := New(DefaultAttributes, DefaultEvents)
	attrs, events := r.Span(s)
	assert.Equal(t, 2, attrs)
	assert.Equal(t, 1, events)
	assert.Equal(t, 1, s.Attributes().Len())
	assert.Equal(t, 1, s.Events().Len())
	assert.Equal(t, 1, s.Events().At(0).Attributes().Len())
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
		"a": false, "ab": true, "abx": true, "abcd": true, "abce": true, "x": true, "xy": false, "b": false,
	} {
		assert.Equal(t, want, m.Match(key), key)
	}
}

// TestSpanWithoutContentAllocatesNothing: most spans carry no content; for
// them redaction is one walk of the attributes, no edit, no allocation.
func TestSpanWithoutContentAllocatesNothing(t *testing.T) {
	s := ptrace.NewSpan()
	for _, k := range []string{"gen_ai.latency.e2e", "gen_ai.usage.prompt_tokens", "gen_ai.request.id", "http.route"} {
		s.Attributes().PutStr(k, "v")
	}
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.Attributes().PutStr("exception.type", "E")
	r := New(DefaultAttributes, DefaultEvents)
	allocs := testing.AllocsPerRun(100, func() {
		attrs, events := r.Span(s)
		if attrs != 0 || events != 0 {
			t.Fatal("removed something")
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 4, s.Attributes().Len())
}
