// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package join pairs SGLang request spans with the queue stage spans of the
// same trace, which SGLang exports from another process in another batch,
// in either order. All state is bounded; the caller supplies the clock.
package join // import "github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"

import (
	"container/list"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Settings bound the table.
type Settings struct {
	// Wait is how long a request span is held for its queue stage.
	Wait time.Duration
	// StageTTL is how long a queue stage waits for its request span. SGLang
	// ends the request span only when the request finishes, so a stage can
	// precede it by the whole decode.
	StageTTL time.Duration
	// MaxEntries caps held request spans plus stage records.
	MaxEntries int
}

// Released is a held request span let go, with the queue time if the
// stages gave one.
type Released struct {
	Traces     ptrace.Traces // one resource, one scope, one span
	Queue      float64
	QueueKnown bool
}

type entry struct {
	trace    pcommon.TraceID
	deadline time.Time
	queue    float64
	known    bool
	held     []ptrace.Traces
	list     *list.List
	elem     *list.Element
}

// Table is safe for concurrent use. Stage records and held request spans
// each keep a list in arrival order; with one TTL per list that is also
// deadline order, so expiry and eviction only look at the fronts.
type Table struct {
	set     Settings
	mu      sync.Mutex
	entries map[pcommon.TraceID]*entry
	stages  *list.List
	held    *list.List
}

// New returns an empty table.
func New(set Settings) *Table {
	return &Table{set: set, entries: map[pcommon.TraceID]*entry{}, stages: list.New(), held: list.New()}
}

// Len is the number of entries, held spans and stage records together.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// AddStage records a queue stage of seconds for trace. It returns request
// spans that were waiting for it, and how many entries were evicted to make
// room (their held spans are returned too, without a queue).
func (t *Table) AddStage(trace pcommon.TraceID, seconds float64, now time.Time) (out []Released, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[trace]
	if ok && len(e.held) > 0 {
		// The request span came first: release it now with this queue.
		// Several stages of one request (retraction) add up; the first
		// one to arrive releases, so late ones are not waited for.
		q := e.queue + seconds
		for _, td := range e.held {
			out = append(out, Released{Traces: td, Queue: q, QueueKnown: true})
		}
		t.remove(e)
		return out, 0
	}
	if ok {
		e.queue += seconds
		return nil, 0
	}
	out, evicted = t.makeRoom()
	t.insert(t.stages, &entry{trace: trace, deadline: now.Add(t.set.StageTTL), queue: seconds, known: true})
	return out, evicted
}

// AddRequest offers a request span. If its trace's queue stage is already
// known, it returns that queue and the caller processes the span at once.
// Otherwise the table takes td and holds it until AddStage or Expire
// releases it. Evicted entries' held spans are returned in evictedOut.
func (t *Table) AddRequest(trace pcommon.TraceID, td ptrace.Traces, now time.Time) (queue float64, known, held bool, evictedOut []Released, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[trace]; ok {
		if e.known && len(e.held) == 0 {
			t.remove(e)
			return e.queue, true, false, nil, 0
		}
		// Another request span of the same trace is already waiting.
		e.held = append(e.held, td)
		return 0, false, true, nil, 0
	}
	evictedOut, evicted = t.makeRoom()
	t.insert(t.held, &entry{trace: trace, deadline: now.Add(t.set.Wait), held: []ptrace.Traces{td}})
	return 0, false, true, evictedOut, evicted
}

// Expire releases request spans whose wait is over and forgets stage
// records past their TTL. timedOut counts the released request spans.
func (t *Table) Expire(now time.Time) (out []Released, timedOut int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range []*list.List{t.held, t.stages} {
		for l.Len() > 0 {
			e := l.Front().Value.(*entry)
			if now.Before(e.deadline) {
				break
			}
			for _, td := range e.held {
				out = append(out, Released{Traces: td})
			}
			timedOut += len(e.held)
			t.remove(e)
		}
	}
	return out, timedOut
}

// Drain releases everything held, for shutdown.
func (t *Table) Drain() []Released {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Released
	for el := t.held.Front(); el != nil; el = el.Next() {
		for _, td := range el.Value.(*entry).held {
			out = append(out, Released{Traces: td})
		}
	}
	t.entries = map[pcommon.TraceID]*entry{}
	t.held.Init()
	t.stages.Init()
	return out
}

func (t *Table) insert(l *list.List, e *entry) {
	e.list = l
	e.elem = l.PushBack(e)
	t.entries[e.trace] = e
}

func (t *Table) remove(e *entry) {
	e.list.Remove(e.elem)
	delete(t.entries, e.trace)
}

// makeRoom evicts when the table is full: the oldest stage record first
// (losing it costs one queue figure), then the oldest held request span,
// which is handed back, never dropped.
func (t *Table) makeRoom() (out []Released, evicted int) {
	for len(t.entries) >= t.set.MaxEntries && len(t.entries) > 0 {
		l := t.stages
		if l.Len() == 0 {
			l = t.held
		}
		e := l.Front().Value.(*entry)
		for _, td := range e.held {
			out = append(out, Released{Traces: td})
		}
		t.remove(e)
		evicted++
	}
	return out, evicted
}
