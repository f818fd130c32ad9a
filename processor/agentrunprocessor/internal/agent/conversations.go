// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"container/list"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The turn counters (turns.go numbers the turns with them). Apart from
// turns.go because the Assembler in state.go holds one.

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
