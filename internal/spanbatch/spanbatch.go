// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package spanbatch moves spans out of a batch, for processors that hold
// some spans back (the SGLang join, the agent assembly, the GPU join) and
// pass the rest on at once.
package spanbatch // import "github.com/inferprof/inferprof/internal/spanbatch"

import "go.opentelemetry.io/collector/pdata/ptrace"

// Take returns the function that moves span out of the batch into one of
// its own, with its resource and scope. A table holding the span calls it
// only when it holds it, and under its lock, so a concurrent tick never
// reads a batch half made. The emptied place is removed by RemoveIndexes.
func Take(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) func() ptrace.Traces {
	return func() ptrace.Traces {
		one := ptrace.NewTraces()
		rs2 := one.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(rs2.Resource())
		rs2.SetSchemaUrl(rs.SchemaUrl())
		ss2 := rs2.ScopeSpans().AppendEmpty()
		ss.Scope().CopyTo(ss2.Scope())
		ss2.SetSchemaUrl(ss.SchemaUrl())
		span.MoveTo(ss2.Spans().AppendEmpty())
		return one
	}
}

// RemoveIndexes removes the spans at the given ascending indexes (the
// places of spans moved out by Take).
func RemoveIndexes(spans ptrace.SpanSlice, idx []int) {
	i, next := 0, 0
	spans.RemoveIf(func(ptrace.Span) bool {
		drop := next < len(idx) && idx[next] == i
		if drop {
			next++
		}
		i++
		return drop
	})
}

// RemoveEmpty drops scopes and resources left without spans.
func RemoveEmpty(td ptrace.Traces) {
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
}

// Only is the one span of a batch that Take made.
func Only(td ptrace.Traces) ptrace.Span {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
}
