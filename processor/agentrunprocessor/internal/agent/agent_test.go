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

func attrsOf(td ptrace.Traces) map[string]any {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
}

// released maps the released spans by the node id the test gave them.
func released(t *testing.T, out []Release, ids map[ptrace.Traces]pcommon.SpanID) map[pcommon.SpanID]map[string]any {
	t.Helper()
	got := map[pcommon.SpanID]map[string]any{}
	for _, r := range out {
		for _, td := range r.Spans {
			got[ids[td]] = attrsOf(td)
		}
	}
	return got
}

// TestBottleneckIsAChild: the bottleneck is the run's longest child (model
// call, tool call or nested run, seen through grouping spans), not the
// longest call anywhere below it.
func TestBottleneckIsAChild(t *testing.T) {
	a := New(Settings{MaxHold: time.Minute, MaxSpans: 100, MaxSpansPerTrace: 100, MaxConversations: 10, ConversationIdle: time.Hour})
	now := time.Unix(100, 0)
	trace := pcommon.TraceID{2}
	id := func(i byte) pcommon.SpanID { return pcommon.SpanID{7: i} }
	const s = int64(1e9)
	ids := map[ptrace.Traces]pcommon.SpanID{}
	hold := func(n Node) []Release {
		td := newHeld()
		ids[td] = n.ID
		return a.Hold(trace, n, func() ptrace.Traces { return td }, now)
	}
	// run 1: tool 0-5 s; a graph node (a grouping span) 5-7 s holding a
	// model call 5.5-6.5 s; a nested run 7-17 s whose own calls last 4 s
	// each, shorter than the tool: the nested run, 10 s, is the bottleneck.
	a.Record(trace, Node{ID: id(3), Parent: id(2), Start: 0, End: 5 * s, Role: Tool, Name: "execute_tool fetch"}, now)
	a.Record(trace, Node{ID: id(4), Parent: id(2), Start: 5 * s, End: 7 * s, Role: Step, Name: "agent.task"}, now)
	hold(Node{ID: id(5), Parent: id(4), Start: 5*s + s/2, End: 6*s + s/2, Role: Model, Name: "chat outer"})
	hold(Node{ID: id(7), Parent: id(6), Start: 7 * s, End: 11 * s, Role: Model, Name: "chat inner 1"})
	a.Record(trace, Node{ID: id(8), Parent: id(6), Start: 11 * s, End: 15 * s, Role: Tool, Name: "execute_tool inner"}, now)
	hold(Node{ID: id(6), Parent: id(2), Start: 7 * s, End: 17 * s, Role: Agent, Name: "invoke_agent inner", AgentName: "inner"})
	// run 2, beside it under the same top: its longest child is the model
	// call inside a grouping span, named by the call, not the group.
	a.Record(trace, Node{ID: id(11), Parent: id(10), Start: 0, End: 4 * s, Role: Step, Name: "agent.task"}, now)
	hold(Node{ID: id(12), Parent: id(11), Start: s, End: 4 * s, Role: Model, Name: "chat run2"})
	a.Record(trace, Node{ID: id(13), Parent: id(10), Start: 4 * s, End: 6 * s, Role: Tool, Name: "execute_tool run2"}, now)
	hold(Node{ID: id(10), Parent: id(1), Start: 0, End: 6 * s, Role: Agent, Name: "invoke_agent two"})
	hold(Node{ID: id(2), Parent: id(1), Start: 0, End: 18 * s, Role: Agent, Name: "invoke_agent outer", AgentName: "outer"})
	a.Record(trace, Node{ID: id(1), Start: 0, End: 18 * s, Kind: ptrace.SpanKindServer}, now)
	got := released(t, a.Settle(now), ids)
	assert.Equal(t, "invoke_agent inner", got[id(2)]["inferprof.agent.bottleneck"], "the nested run is the outer run's longest child")
	assert.EqualValues(t, 2, got[id(2)]["inferprof.agent.model_calls"], "calls still count through the nested run")
	assert.Equal(t, "chat inner 1", got[id(6)]["inferprof.agent.bottleneck"], "the nested run's own child; ties go to the earliest")
	assert.Equal(t, "chat run2", got[id(10)]["inferprof.agent.bottleneck"], "a grouping span is looked through")
}

// TestCallSplit: a model call joined to the engine request that served it
// gets that request's queue, prefill and decode, and the rest as other,
// whether the engine's span came before or after the call's, in separate
// calls; a phase the engine did not report is left out.
func TestCallSplit(t *testing.T) {
	const s = int64(1e9)
	id := func(i byte) pcommon.SpanID { return pcommon.SpanID{7: i} }
	engine := func(start int64, queue, prefill, decode int64, has bool) Node {
		q := Interval{start, start + queue}
		p := Interval{q.End, q.End + prefill}
		d := Interval{p.End, p.End + decode}
		return Node{ID: id(5), Parent: id(4), Start: start, End: d.End, Role: Engine, Kind: ptrace.SpanKindServer,
			Queue: q, Prefill: p, Decode: d, HasQueue: true, HasPrefill: has, HasDec: has}
	}
	for _, tc := range []struct {
		name        string
		engineFirst bool
		engine      Node
		want        map[string]any // figures on the call; nil: absent
	}{
		{"engine last", false, engine(s+s/10, s/2, s/4, 2*s, true),
			map[string]any{"queue": 0.5, "prefill": 0.25, "decode": 2.0, "other": 3.0 - 2.75}},
		{"engine first", true, engine(s+s/10, s/2, s/4, 2*s, true),
			map[string]any{"queue": 0.5, "prefill": 0.25, "decode": 2.0, "other": 3.0 - 2.75}},
		{"queued 0 s", true, engine(s+s/10, 0, s/4, 2*s, true),
			map[string]any{"queue": 0.0, "prefill": 0.25, "decode": 2.0, "other": 3.0 - 2.25}},
		{"queue only (TensorRT-LLM)", false, engine(s+s/10, s/2, 0, 0, false),
			map[string]any{"queue": 0.5, "prefill": nil, "decode": nil, "other": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Settings{Wait: time.Second, MaxHold: time.Minute, MaxSpans: 100, MaxSpansPerTrace: 100, MaxConversations: 10, ConversationIdle: time.Hour})
			now := time.Unix(100, 0)
			trace := pcommon.TraceID{3}
			ids := map[ptrace.Traces]pcommon.SpanID{}
			hold := func(n Node) {
				td := newHeld()
				ids[td] = n.ID
				a.Hold(trace, n, func() ptrace.Traces { return td }, now)
				a.Settle(now)
			}
			sendEngine := func() {
				_, held, _ := a.Engine(trace, tc.engine, nil, now)
				assert.False(t, held, "nothing to take it with")
				a.Settle(now)
			}
			if tc.engineFirst {
				sendEngine()
			}
			a.Record(trace, Node{ID: id(4), Parent: id(3), Start: s + s/20, End: 4*s - s/20, Kind: ptrace.SpanKindClient}, now)
			a.Settle(now)
			hold(Node{ID: id(3), Parent: id(2), Start: s, End: 4 * s, Role: Model, Name: "chat m"})
			hold(Node{ID: id(2), Parent: id(1), Start: 0, End: 5 * s, Role: Agent, Name: "invoke_agent a"})
			a.Record(trace, Node{ID: id(1), Start: 0, End: 5 * s, Kind: ptrace.SpanKindServer}, now)
			assert.Empty(t, a.Settle(now), "complete: waits for the engine's late spans")
			if !tc.engineFirst {
				sendEngine()
			}
			got := released(t, a.Expire(now.Add(time.Second)), ids)
			call := got[id(3)]
			for part, want := range tc.want {
				key := "inferprof.call.time_in_" + part
				if want == nil {
					assert.NotContains(t, call, key)
					continue
				}
				assert.InDelta(t, want, call[key], 1e-9, key)
			}
			assert.InDelta(t, tc.want["queue"], got[id(2)]["inferprof.agent.time_in_queue"], 1e-9, "the run sums its calls' queue")
		})
	}
}

// TestTurnsInStartOrder: two turns of one conversation released by the
// same expiry are numbered by their start, whichever arrived first.
func TestTurnsInStartOrder(t *testing.T) {
	for _, first := range []byte{1, 2} {
		a := New(Settings{Wait: time.Second, MaxHold: time.Minute, MaxSpans: 100, MaxSpansPerTrace: 100, MaxConversations: 10, ConversationIdle: time.Hour})
		now := time.Unix(100, 0)
		ids := map[ptrace.Traces]pcommon.SpanID{}
		turn := func(i byte) {
			start := int64(i) * 100
			trace := pcommon.TraceID{i}
			td := newHeld()
			ids[td] = pcommon.SpanID{7: i}
			a.Hold(trace, Node{ID: pcommon.SpanID{7: i}, Start: start, End: start + 50, Role: Agent, AgentName: "a", Conversation: "c"},
				func() ptrace.Traces { return td }, now)
		}
		turn(first)
		turn(3 - first)
		a.Settle(now)
		got := released(t, a.Expire(now.Add(time.Second)), ids)
		assert.EqualValues(t, 1, got[pcommon.SpanID{7: 1}]["inferprof.agent.turn"], "arrival: trace %d first", first)
		assert.EqualValues(t, 2, got[pcommon.SpanID{7: 2}]["inferprof.agent.turn"], "arrival: trace %d first", first)
		assert.InDelta(t, 50e-9, got[pcommon.SpanID{7: 2}]["inferprof.agent.time_since_previous_turn"], 1e-18)
	}
}
