// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// newHeld is a take function: a batch of one empty span.
func newHeld() ptrace.Traces {
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	return td
}

func TestUnionAndIntersect(t *testing.T) {
	u := union([]Interval{{5, 7}, {1, 3}, {2, 4}, {6, 6}, {8, 9}})
	assert.Equal(t, []Interval{{1, 4}, {5, 7}, {8, 9}}, u, "overlaps merge; empty intervals go")
	assert.InDelta(t, 6e-9, length(u), 1e-18)
	assert.Equal(t, []Interval{{2, 4}, {5, 6}}, intersect(u, []Interval{{2, 6}}))
	assert.Empty(t, intersect(u, []Interval{{4, 5}}), "touching is not overlapping")
}

func TestConversationTurns(t *testing.T) {
	c := newConversations(2, time.Hour)
	now := time.Unix(0, 0)
	tr := func(i byte) pcommon.TraceID { return pcommon.TraceID{15: i} }
	n, _, ok, _ := c.turn("a", tr(1), 0, 10, now)
	assert.EqualValues(t, 1, n)
	assert.False(t, ok, "no previous turn")
	n, gap, ok, _ := c.turn("a", tr(2), 25, 30, now)
	assert.EqualValues(t, 2, n)
	assert.True(t, ok)
	assert.InDelta(t, 15e-9, gap, 1e-18)
	n, _, _, _ = c.turn("a", tr(2), 25, 40, now)
	assert.EqualValues(t, 2, n, "the same trace keeps its turn")
	n, _, ok, _ = c.turn("a", tr(3), 35, 50, now)
	assert.EqualValues(t, 3, n)
	assert.False(t, ok, "overlapping the previous turn: no gap")
	c.turn("b", tr(4), 0, 1, now)
	_, _, _, ev := c.turn("c", tr(5), 0, 1, now)
	assert.Equal(t, 1, ev, "past max, the least recently active goes")
	n, _, _, _ = c.turn("a", tr(6), 60, 70, now)
	assert.EqualValues(t, 1, n, "a was forgotten")
	n, _, _, _ = c.turn("c", tr(7), 0, 1, now.Add(2*time.Hour))
	assert.EqualValues(t, 1, n, "idle past conversation_idle starts again")
}

// TestChildrenFirstAcrossBatches: a run's children come before it, its top
// last; the run waits Wait after its top, then gets its figures.
func TestChildrenFirstAcrossBatches(t *testing.T) {
	a := New(Settings{Wait: time.Second, MaxHold: time.Minute, MaxSpans: 100, MaxSpansPerTrace: 100, MaxConversations: 10, ConversationIdle: time.Hour})
	now := time.Unix(100, 0)
	trace := pcommon.TraceID{1}
	id := func(i byte) pcommon.SpanID { return pcommon.SpanID{7: i} }
	a.Record(trace, Node{ID: id(3), Parent: id(2), Start: 1, End: 3, Role: Tool, Name: "execute_tool t"}, now)
	a.Record(trace, Node{ID: id(4), Parent: id(2), Start: 4, End: 8, Role: Tool, Failed: true, Name: "execute_tool u"}, now)
	assert.Empty(t, a.Settle(now))
	a.Hold(trace, Node{ID: id(2), Parent: id(1), Start: 0, End: 10, Role: Agent, AgentName: "a"}, newHeld, now)
	assert.Empty(t, a.Settle(now), "its top has not come")
	a.Record(trace, Node{ID: id(1), Start: 0, End: 11, Role: Plain, Kind: ptrace.SpanKindServer}, now)
	assert.Empty(t, a.Settle(now), "complete: now it waits for late spans")
	assert.Empty(t, a.Expire(now.Add(999*time.Millisecond)))
	out := a.Expire(now.Add(time.Second))
	if assert.Len(t, out, 1) {
		attrs := out[0].Spans[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
		assert.InDelta(t, 6e-9, attrs["inferprof.agent.time_in_tools"], 1e-18)
		assert.EqualValues(t, 1, attrs["inferprof.agent.tool_errors"])
		assert.Equal(t, "execute_tool u", attrs["inferprof.agent.bottleneck"])
	}
	assert.Equal(t, int64(1), a.TakeStats().Runs)
}
