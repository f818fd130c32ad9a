// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
)

// A turn is one trace's top-level agent runs of a conversation
// (gen_ai.conversation.id, or OpenInference's session.id): the user's
// message and the agent's answer. Nested runs with the same conversation
// (an agent used as a tool, LangGraph's graph and its workflow) belong to
// their top run's turn.

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
