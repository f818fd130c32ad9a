// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package tracetable is the bounded, time-limited per-trace table behind the
// processor's joins: the SGLang queue-stage join and the agent-run assembly.
// Spans of one trace arrive across batches, in any order and from several
// processes; a join keeps what it learnt of a trace (and the spans it holds
// back) in an entry until the trace is complete or its time is up.
//
// Every entry sits on one of a fixed set of lists, each with one TTL. An
// entry's deadline is set when it is put at the back of its list (its time on
// that list plus the list's TTL), so each list is in deadline order and expiry
// and eviction only look at the fronts. Entries have a weight (what they count
// against the table's cap: held spans, recorded spans); the owner decides it.
//
// A Table is not safe for concurrent use: its owner holds its own lock.
package tracetable // import "github.com/inferprof/inferprof/internal/tracetable"

import (
	"container/list"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Entry is one trace's state.
type Entry[V any] struct {
	Trace pcommon.TraceID
	Value V

	weight   int
	list     int
	deadline time.Time
	elem     *list.Element
}

// List is the index of the list the entry is on.
func (e *Entry[V]) List() int { return e.list }

// Deadline is when the entry expires.
func (e *Entry[V]) Deadline() time.Time { return e.deadline }

// Weight is what the entry counts against the cap.
func (e *Entry[V]) Weight() int { return e.weight }

// Table maps trace ids to entries, bounded by the sum of their weights.
type Table[V any] struct {
	ttl     []time.Duration
	lists   []*list.List
	entries map[pcommon.TraceID]*Entry[V]
	size    int
	max     int
}

// New returns an empty table whose weights may add up to max, with one list
// per TTL.
func New[V any](max int, ttls ...time.Duration) *Table[V] {
	t := &Table[V]{ttl: ttls, entries: map[pcommon.TraceID]*Entry[V]{}, max: max}
	for range ttls {
		t.lists = append(t.lists, list.New())
	}
	return t
}

// Len is the sum of the entries' weights.
func (t *Table[V]) Len() int { return t.size }

// Entries is the number of traces held.
func (t *Table[V]) Entries() int { return len(t.entries) }

// Max is the cap on Len.
func (t *Table[V]) Max() int { return t.max }

// Get returns the trace's entry, or nil.
func (t *Table[V]) Get(trace pcommon.TraceID) *Entry[V] { return t.entries[trace] }

// Add inserts a new entry at the back of list l. It does not make room: call
// MakeRoom first.
func (t *Table[V]) Add(trace pcommon.TraceID, l, weight int, v V, now time.Time) *Entry[V] {
	e := &Entry[V]{Trace: trace, Value: v, weight: weight, list: l, deadline: now.Add(t.ttl[l])}
	e.elem = t.lists[l].PushBack(e)
	t.entries[trace] = e
	t.size += weight
	return e
}

// Move puts e at the back of list l (its own list too), with a deadline of
// now plus that list's TTL.
func (t *Table[V]) Move(e *Entry[V], l int, now time.Time) {
	t.lists[e.list].Remove(e.elem)
	e.list = l
	e.deadline = now.Add(t.ttl[l])
	e.elem = t.lists[l].PushBack(e)
}

// Reweigh changes what e counts against the cap.
func (t *Table[V]) Reweigh(e *Entry[V], weight int) {
	t.size += weight - e.weight
	e.weight = weight
}

// Remove takes e out of the table.
func (t *Table[V]) Remove(e *Entry[V]) {
	t.lists[e.list].Remove(e.elem)
	delete(t.entries, e.Trace)
	t.size -= e.weight
}

// Expire removes every entry whose deadline is not after now, list by list
// in index order, and hands each to fn after removing it.
func (t *Table[V]) Expire(now time.Time, fn func(*Entry[V])) {
	for _, l := range t.lists {
		for l.Len() > 0 {
			e := l.Front().Value.(*Entry[V])
			if now.Before(e.deadline) {
				break
			}
			t.Remove(e)
			fn(e)
		}
	}
}

// MakeRoom evicts entries until add more weight fits: the oldest entry of
// the first list in order that has one, then the next list's. keep, an entry
// about to grow, goes last of all. Each evicted entry is handed to fn after
// it is removed; it returns how many were evicted.
func (t *Table[V]) MakeRoom(add int, keep *Entry[V], order []int, fn func(*Entry[V])) int {
	evicted := 0
	for t.size+add > t.max && t.size > 0 {
		e := t.oldest(keep, order)
		if e == nil {
			e = keep
		}
		if e == nil {
			break
		}
		t.Remove(e)
		evicted++
		fn(e)
		if e == keep {
			break
		}
	}
	return evicted
}

func (t *Table[V]) oldest(skip *Entry[V], order []int) *Entry[V] {
	for _, i := range order {
		for el := t.lists[i].Front(); el != nil; el = el.Next() {
			if e := el.Value.(*Entry[V]); e != skip {
				return e
			}
		}
	}
	return nil
}

// Drain removes every entry, list by list in index order, and hands each to
// fn.
func (t *Table[V]) Drain(fn func(*Entry[V])) {
	for _, l := range t.lists {
		for el := l.Front(); el != nil; el = el.Next() {
			fn(el.Value.(*Entry[V]))
		}
		l.Init()
	}
	t.entries = map[pcommon.TraceID]*Entry[V]{}
	t.size = 0
}
