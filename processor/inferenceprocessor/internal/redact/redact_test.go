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
