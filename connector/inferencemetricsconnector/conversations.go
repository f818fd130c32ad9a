// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"container/list"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
)

// conversations remembers the last turn of each conversation, to observe
// its turn count once it has been idle for a while. Bounded: past max, the
// least recently active is observed early, and counted.
type conversations struct {
	max       int
	idle      time.Duration
	m         map[string]*list.Element
	lru       *list.List // front: least recently active
	resources map[aggregate.ResourceKey]*convResource
}

type convState struct {
	key   string
	agent string
	turns int64
	res   aggregate.ResourceKey
	seen  time.Time
}

type convResource struct {
	attrs pcommon.Map
	refs  int
}

func newConversations(maxConv int, idle time.Duration) *conversations {
	return &conversations{max: maxConv, idle: idle, m: map[string]*list.Element{}, lru: list.New(),
		resources: map[aggregate.ResourceKey]*convResource{}}
}

func (cv *conversations) see(key, agent string, turn int64, res aggregate.ResourceKey, resAttrs pcommon.Map, now time.Time) (early *convState) {
	if el, ok := cv.m[key]; ok {
		st := el.Value.(*convState)
		st.turns = max(st.turns, turn)
		st.seen = now
		cv.lru.MoveToBack(el)
		return nil
	}
	if len(cv.m) >= cv.max {
		early = cv.pop()
	}
	r := cv.resources[res]
	if r == nil {
		r = &convResource{attrs: pcommon.NewMap()}
		resAttrs.CopyTo(r.attrs)
		cv.resources[res] = r
	}
	r.refs++
	cv.m[key] = cv.lru.PushBack(&convState{key: key, agent: agent, turns: turn, res: res, seen: now})
	return early
}

func (cv *conversations) pop() *convState {
	el := cv.lru.Front()
	st := el.Value.(*convState)
	cv.lru.Remove(el)
	delete(cv.m, st.key)
	return st
}

// ended takes out the conversations idle for cv.idle at now, or all of them.
func (cv *conversations) ended(now time.Time, all bool, fn func(st *convState, resAttrs pcommon.Map)) {
	for cv.lru.Len() > 0 {
		st := cv.lru.Front().Value.(*convState)
		if !all && now.Sub(st.seen) < cv.idle {
			return
		}
		cv.pop()
		cv.release(st, fn)
	}
}

func (cv *conversations) release(st *convState, fn func(st *convState, resAttrs pcommon.Map)) {
	r := cv.resources[st.res]
	fn(st, r.attrs)
	if r.refs--; r.refs == 0 {
		delete(cv.resources, st.res)
	}
}
