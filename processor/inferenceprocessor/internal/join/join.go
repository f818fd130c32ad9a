// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package join pairs SGLang root request spans with the queue stage spans of
// the same trace, which SGLang exports from another process in another
// batch, in either order. All state is bounded; the caller supplies the
// clock.
//
// Two stages matter (python/sglang/srt/observability/req_time_stats.py):
// prefill_waiting is the queue of a unified or PD-prefill request, and
// decode_waiting is the decode server's queue under PD disaggregation. In
// unified mode SGLang also emits decode_waiting, for the gap between prefill
// and the first decode batch; a unified root never takes it as queue time.
package join // import "github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"

import (
	"container/list"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Stage says which queue stage a record or a root is about.
type Stage int

const (
	// PrefillWaiting is the queue a unified or PD-prefill root takes.
	PrefillWaiting Stage = iota
	// DecodeWaiting is the queue a PD-decode root takes.
	DecodeWaiting
	numStages
)

// Settings bound the table.
type Settings struct {
	// Wait is how long a request span is held for its queue stage.
	Wait time.Duration
	// StageTTL is how long a queue stage waits for its request span. SGLang
	// ends the request span only when the request finishes, so a stage can
	// precede it by the whole decode.
	StageTTL time.Duration
	// MaxEntries caps held request spans plus traces with stage records:
	// every held span counts, so one trace cannot hold more than the cap.
	MaxEntries int
}

// Released is a held request span let go, with the queue time if the
// stages gave one.
type Released struct {
	Traces     ptrace.Traces // one resource, one scope, one span
	Queue      float64
	QueueKnown bool
	QueueStart pcommon.Timestamp
}

type stageRec struct {
	seconds float64
	start   pcommon.Timestamp // of the first stage span
	known   bool
}

type heldSpan struct {
	td      ptrace.Traces
	needs   Stage
	unified bool // a unified root consumes the whole trace's records
}

type entry struct {
	trace    pcommon.TraceID
	deadline time.Time
	stages   [numStages]stageRec
	held     []heldSpan
	list     *list.List
	elem     *list.Element
}

// weight is what an entry counts against MaxEntries.
func (e *entry) weight() int { return max(1, len(e.held)) }

// Table is safe for concurrent use. Entries with held spans keep one list,
// entries with only stage records another, each in arrival order; with one
// TTL per list that is also deadline order, so expiry and eviction only look
// at the fronts.
type Table struct {
	set     Settings
	mu      sync.Mutex
	entries map[pcommon.TraceID]*entry
	stages  *list.List
	held    *list.List
	size    int // sum of entry weights
}

// New returns an empty table.
func New(set Settings) *Table {
	return &Table{set: set, entries: map[pcommon.TraceID]*entry{}, stages: list.New(), held: list.New()}
}

// Len is what the table holds against MaxEntries: held spans plus traces
// with only stage records.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// AddStage records a queue stage of seconds, starting at start, for trace.
// It returns request spans that were waiting for it, and how many entries
// were evicted to make room (their held spans are returned too, without a
// queue).
func (t *Table) AddStage(trace pcommon.TraceID, stage Stage, seconds float64, start pcommon.Timestamp, now time.Time) (out []Released, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[trace]
	if !ok {
		out, evicted = t.makeRoom(1, nil)
		e = &entry{trace: trace, deadline: now.Add(t.set.StageTTL)}
		t.insert(t.stages, e)
	}
	rec := &e.stages[stage]
	// Stages of one request add up (an earlier SGLang re-queued a
	// retracted request); the first one to arrive releases, so late ones
	// are not waited for.
	if !rec.known {
		rec.start = start
	}
	rec.seconds += seconds
	rec.known = true
	got := *rec // consume may clear rec; every root waiting for it gets it
	kept := e.held[:0]
	for _, h := range e.held {
		if h.needs != stage {
			kept = append(kept, h)
			continue
		}
		out = append(out, Released{Traces: h.td, Queue: got.seconds, QueueKnown: true, QueueStart: got.start})
		t.consume(e, h)
	}
	if len(kept) == len(e.held) {
		return out, evicted
	}
	t.size -= e.weight()
	e.held = kept
	t.settle(e, now)
	return out, evicted
}

// AddRequest offers a root request span that needs stage. If that stage
// is already known, it returns its queue and the caller processes the span
// at once. Otherwise the table calls take, under its lock, for the batch
// to hold, and holds it until AddStage or Expire releases it: a ticker's
// Expire can never see a batch still being filled. unified roots take the
// whole trace's records with them; PD roots only their own stage, leaving
// the other role's. Evicted entries' held spans are returned in evictedOut.
func (t *Table) AddRequest(trace pcommon.TraceID, needs Stage, unified bool, take func() ptrace.Traces, now time.Time) (q Released, held bool, evictedOut []Released, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := heldSpan{needs: needs, unified: unified}
	if e, ok := t.entries[trace]; ok && e.stages[needs].known {
		rec := e.stages[needs]
		t.consume(e, h)
		if len(e.held) == 0 && !e.hasStages() {
			t.remove(e)
		}
		return Released{Queue: rec.seconds, QueueKnown: true, QueueStart: rec.start}, false, nil, 0
	}
	e := t.entries[trace]
	add := 1
	if e != nil && len(e.held) == 0 {
		add = 0 // a stage-only entry that starts holding keeps its weight
	}
	evictedOut, evicted = t.makeRoom(add, e)
	h.td = take()
	if e, ok := t.entries[trace]; ok {
		t.size -= e.weight()
		e.held = append(e.held, h)
		t.size += e.weight()
		if e.list != t.held {
			e.list.Remove(e.elem)
			e.deadline = now.Add(t.set.Wait)
			e.list = t.held
			e.elem = t.held.PushBack(e)
		}
		return Released{}, true, evictedOut, evicted
	}
	t.insert(t.held, &entry{trace: trace, deadline: now.Add(t.set.Wait), held: []heldSpan{h}})
	return Released{}, true, evictedOut, evicted
}

// consume clears the stage records a root takes.
func (t *Table) consume(e *entry, h heldSpan) {
	if h.unified {
		e.stages = [numStages]stageRec{}
		return
	}
	e.stages[h.needs] = stageRec{}
}

func (e *entry) hasStages() bool {
	for _, s := range e.stages {
		if s.known {
			return true
		}
	}
	return false
}

// settle puts an entry whose held spans changed back where it belongs:
// still holding, it stays; holding nothing but stage records, it waits for
// its other roots for StageTTL; otherwise it goes.
func (t *Table) settle(e *entry, now time.Time) {
	switch {
	case len(e.held) > 0:
		t.size += e.weight()
	case e.hasStages():
		t.size += e.weight()
		e.list.Remove(e.elem)
		e.deadline = now.Add(t.set.StageTTL)
		e.list = t.stages
		e.elem = t.stages.PushBack(e)
	default:
		e.list.Remove(e.elem)
		delete(t.entries, e.trace)
	}
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
			for _, h := range e.held {
				out = append(out, Released{Traces: h.td})
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
		for _, h := range el.Value.(*entry).held {
			out = append(out, Released{Traces: h.td})
		}
	}
	t.entries = map[pcommon.TraceID]*entry{}
	t.held.Init()
	t.stages.Init()
	t.size = 0
	return out
}

func (t *Table) insert(l *list.List, e *entry) {
	e.list = l
	e.elem = l.PushBack(e)
	t.entries[e.trace] = e
	t.size += e.weight()
}

func (t *Table) remove(e *entry) {
	e.list.Remove(e.elem)
	delete(t.entries, e.trace)
	t.size -= e.weight()
}

// makeRoom evicts until add more fit: the oldest stage-only entry first
// (losing it costs one queue figure), then the oldest holding entry, whose
// spans are handed back, never dropped. keep, the entry about to grow, goes
// last of all.
func (t *Table) makeRoom(add int, keep *entry) (out []Released, evicted int) {
	for t.size+add > t.set.MaxEntries && t.size > 0 {
		e := t.oldest(keep)
		if e == nil {
			e = keep
		}
		for _, h := range e.held {
			out = append(out, Released{Traces: h.td})
		}
		t.remove(e)
		evicted++
		if e == keep {
			break
		}
	}
	return out, evicted
}

func (t *Table) oldest(skip *entry) *entry {
	for _, l := range []*list.List{t.stages, t.held} {
		for el := l.Front(); el != nil; el = el.Next() {
			if e := el.Value.(*entry); e != skip {
				return e
			}
		}
	}
	return nil
}
