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
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/tracetable"
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
	stages [numStages]stageRec
	held   []heldSpan
}

// weight is what an entry counts against MaxEntries.
func (e *entry) weight() int { return max(1, len(e.held)) }

// The table's lists: entries holding request spans wait Wait, entries with
// only stage records StageTTL.
const (
	listHeld = iota
	listStages
)

// evictOrder: a stage-only entry first (losing it costs one queue figure),
// then the oldest holding entry, whose spans are handed back.
var evictOrder = []int{listStages, listHeld}

// Table is safe for concurrent use.
type Table struct {
	mu  sync.Mutex
	tab *tracetable.Table[*entry]
}

// New returns an empty table.
func New(set Settings) *Table {
	return &Table{tab: tracetable.New[*entry](set.MaxEntries, set.Wait, set.StageTTL)}
}

// Len is what the table holds against MaxEntries: held spans plus traces
// with only stage records.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tab.Len()
}

// AddStage records a queue stage of seconds, starting at start, for trace.
// It returns request spans that were waiting for it, and how many entries
// were evicted to make room (their held spans are returned too, without a
// queue).
func (t *Table) AddStage(trace pcommon.TraceID, stage Stage, seconds float64, start pcommon.Timestamp, now time.Time) (out []Released, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	te := t.tab.Get(trace)
	if te == nil {
		evicted = t.tab.MakeRoom(1, nil, evictOrder, func(x *tracetable.Entry[*entry]) { out = releaseAll(out, x.Value) })
		te = t.tab.Add(trace, listStages, 1, &entry{}, now)
	}
	e := te.Value
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
		e.consume(h)
	}
	if len(kept) == len(e.held) {
		return out, evicted
	}
	e.held = kept
	t.settle(te, now)
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
	if te := t.tab.Get(trace); te != nil && te.Value.stages[needs].known {
		e := te.Value
		rec := e.stages[needs]
		e.consume(h)
		if len(e.held) == 0 && !e.hasStages() {
			t.tab.Remove(te)
		}
		return Released{Queue: rec.seconds, QueueKnown: true, QueueStart: rec.start}, false, nil, 0
	}
	te := t.tab.Get(trace)
	add := 1
	if te != nil && len(te.Value.held) == 0 {
		add = 0 // a stage-only entry that starts holding keeps its weight
	}
	evicted = t.tab.MakeRoom(add, te, evictOrder, func(x *tracetable.Entry[*entry]) { evictedOut = releaseAll(evictedOut, x.Value) })
	h.td = take()
	if te = t.tab.Get(trace); te != nil {
		e := te.Value
		e.held = append(e.held, h)
		t.tab.Reweigh(te, e.weight())
		if te.List() != listHeld {
			t.tab.Move(te, listHeld, now)
		}
		return Released{}, true, evictedOut, evicted
	}
	t.tab.Add(trace, listHeld, 1, &entry{held: []heldSpan{h}}, now)
	return Released{}, true, evictedOut, evicted
}

// releaseAll appends e's held spans to out, without a queue.
func releaseAll(out []Released, e *entry) []Released {
	for _, h := range e.held {
		out = append(out, Released{Traces: h.td})
	}
	return out
}

// consume clears the stage records a root takes.
func (e *entry) consume(h heldSpan) {
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
func (t *Table) settle(te *tracetable.Entry[*entry], now time.Time) {
	e := te.Value
	switch {
	case len(e.held) > 0:
		t.tab.Reweigh(te, e.weight())
	case e.hasStages():
		t.tab.Reweigh(te, e.weight())
		t.tab.Move(te, listStages, now)
	default:
		t.tab.Remove(te)
	}
}

// Expire releases request spans whose wait is over and forgets stage
// records past their TTL. timedOut counts the released request spans.
func (t *Table) Expire(now time.Time) (out []Released, timedOut int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tab.Expire(now, func(x *tracetable.Entry[*entry]) {
		out = releaseAll(out, x.Value)
		timedOut += len(x.Value.held)
	})
	return out, timedOut
}

// Drain releases everything held, for shutdown.
func (t *Table) Drain() []Released {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Released
	t.tab.Drain(func(x *tracetable.Entry[*entry]) { out = releaseAll(out, x.Value) })
	return out
}
