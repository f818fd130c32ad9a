// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// A span is one of ours only with both the phase name and the marker: a
// caller's span named "queue" (a message queue's, say) is not skipped.
func TestIsSyntheticPhase(t *testing.T) {
	span := func(name string, marker any) ptrace.Span {
		s := ptrace.NewSpan()
		s.SetName(name)
		switch m := marker.(type) {
		case bool:
			s.Attributes().PutBool(names.AttrSynthetic, m)
		case string:
			s.Attributes().PutStr(names.AttrSynthetic, m)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		span   ptrace.Span
		phased bool
	}{
		{"queue, marked", span(names.SpanPhaseQueue, true), true},
		{"prefill, marked", span(names.SpanPhasePrefill, true), true},
		{"decode, marked", span(names.SpanPhaseDecode, true), true},
		{"queue, unmarked", span(names.SpanPhaseQueue, nil), false},
		{"queue, marker false", span(names.SpanPhaseQueue, false), false},
		{"queue, marker a string", span(names.SpanPhaseQueue, "true"), false},
		{"request span, marked", span("llm_request", true), false},
		{"engine's own phase span", span("vllm.request.queue", true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.phased, IsSyntheticPhase(tc.span))
		})
	}
}
