// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package redact

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

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
