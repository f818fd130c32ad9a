// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"container/list"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
)

// A turn is one trace's top-level agent runs of a conversation
// (gen_ai.conversation.id, or OpenInference's session.id): the user's
// message and the agent's answer. Nested runs with the same conversation
// (an agent used as a tool, LangGraph's graph and its workflow) belong to
// their top run's turn.

// conversations numbers turns per conversation, the most recently active
// MaxConversations of them, forgetting one idle for ConversationIdle.
type conversations struct {
	max  int
	idle time.Duration
	m    map[string]*list.Element
	lru  *list.List // front: least recently active
}

type convState struct {
	key       string
	turns     int64
	lastTrace pcommon.TraceID
	lastEnd   int64
	seen      time.Time
}

func newConversations(maxConv int, idle time.Duration) *conversations {
	return &conversations{max: max(1, maxConv), idle: idle, m: map[string]*list.Element{}, lru: list.New()}
}

// turn returns the turn number of trace in conversation key, and the time
// since the previous turn ended (ok false for the first turn, or when the
// previous turn had not ended before this one started). A trace seen
// before keeps its number.
func (c *conversations) turn(key string, trace pcommon.TraceID, start, end int64, now time.Time) (turn int64, gap float64, gapOK bool, evicted int) {
	for c.lru.Len() > 0 {
		oldest := c.lru.Front().Value.(*convState)
		if c.idle <= 0 || now.Sub(oldest.seen) < c.idle {
			break
		}
		c.lru.Remove(c.lru.Front())
		delete(c.m, oldest.key)
	}
	el, ok := c.m[key]
	if !ok {
		if len(c.m) >= c.max {
			oldest := c.lru.Front()
			delete(c.m, oldest.Value.(*convState).key)
			c.lru.Remove(oldest)
			evicted++
		}
		el = c.lru.PushBack(&convState{key: key})
		c.m[key] = el
	}
	st := el.Value.(*convState)
	st.seen = now
	c.lru.MoveToBack(el)
	if st.turns > 0 && st.lastTrace == trace {
		st.lastEnd = max(st.lastEnd, end)
		return st.turns, 0, false, evicted
	}
	prevEnd := st.lastEnd
	st.turns++
	st.lastTrace, st.lastEnd = trace, end
	if st.turns > 1 && start >= prevEnd && prevEnd > 0 {
		return st.turns, float64(start-prevEnd) / 1e9, true, evicted
	}
	return st.turns, 0, false, evicted
}

// turns numbers the top-level runs released now, per conversation.
func (a *Assembler) turns(tr *traceState, runs []*Node, now time.Time) {
	type turnSpan struct {
		start, end int64
		runs       []*Node
	}
	var order []string
	byConv := map[string]*turnSpan{}
	for _, r := range runs {
		if r.Conversation == "" || tr.nestedIn(r) {
			continue
		}
		t := byConv[r.Conversation]
		if t == nil {
			t = &turnSpan{start: r.Start, end: r.End}
			byConv[r.Conversation] = t
			order = append(order, r.Conversation)
		}
		t.start, t.end = min(t.start, r.Start), max(t.end, r.End)
		t.runs = append(t.runs, r)
	}
	if len(order) == 0 {
		return
	}
	trace := tr.traceID
	for _, key := range order {
		t := byConv[key]
		n, gap, gapOK, ev := a.conv.turn(key, trace, t.start, t.end, now)
		a.stats.Conversations += int64(ev)
		for _, r := range t.runs {
			attrs := tr.heldAttrs(r)
			attrs.PutInt(names.AttrAgentTurn, n)
			if gapOK {
				attrs.PutDouble(names.AttrAgentSincePrevTurn, gap)
			}
		}
	}
}

// nestedIn reports whether an agent run with the same conversation is
// above r.
func (tr *traceState) nestedIn(r *Node) bool {
	cur := r
	for range 256 {
		p := tr.nodes[cur.Parent]
		if p == nil || p == r {
			return false
		}
		if p.Role == Agent && p.Conversation == r.Conversation {
			return true
		}
		cur = p
	}
	return false
}

// heldAttrs returns the attributes of r's held span.
func (tr *traceState) heldAttrs(r *Node) pcommon.Map {
	for _, h := range tr.held {
		if h.node == r {
			return h.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
		}
	}
	return pcommon.NewMap()
}
