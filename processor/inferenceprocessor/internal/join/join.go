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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/tracetable"
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
// stages gave one; or, when Phases is set, a vLLM request's held synthetic
// phase spans, finished already, to pass on as they are.
type Released struct {
	Traces     ptrace.Traces // one resource, one scope, one span (Phases: its phase spans)
	Queue      float64
	QueueKnown bool
	QueueStart pcommon.Timestamp
	Phases     bool
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

// heldPhases are the synthetic phase spans of the request span parent,
// held while the engine's own phase spans may still come (phases.go).
type heldPhases struct {
	parent pcommon.SpanID
	td     ptrace.Traces
}

type entry struct {
	stages [numStages]stageRec
	held   []heldSpan
	// phases: request spans of the trace whose engine-written phase spans
	// were seen; heldPhases: synthetic phase spans waiting to see whether
	// the engine's come after.
	phases     []phaseRec
	heldPhases []heldPhases
}

// phaseRec: the engine wrote phase spans under parent. claimed: the request
// span has been decided (no synthetic set), so later phase spans of the
// same request, split across batches, change nothing; the record stays
// until StageTTL to say so.
type phaseRec struct {
	parent  pcommon.SpanID
	claimed bool
}

func (e *entry) phase(parent pcommon.SpanID) int {
	return slices.IndexFunc(e.phases, func(r phaseRec) bool { return r.parent == parent })
}

func (e *entry) unclaimed() int {
	n := 0
	for _, r := range e.phases {
		if !r.claimed {
			n++
		}
	}
	return n
}

// weight is what an entry counts against MaxEntries: every held span set
// and every phase record counts, so one trace cannot hold more than the cap.
func (e *entry) weight() int { return max(1, e.count()) }

func (e *entry) count() int { return len(e.held) + len(e.heldPhases) + len(e.phases) }

// holding reports whether the entry holds spans (and so waits Wait).
func (e *entry) holding() bool { return len(e.held) > 0 || len(e.heldPhases) > 0 }

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
	// phasesSeen: some engine has written its own phase spans; until then
	// no synthetic phase span is held (see HoldPhases).
	phasesSeen atomic.Bool
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
		if !e.holding() && !e.hasStages() {
			t.tab.Remove(te)
		}
		return Released{Queue: rec.seconds, QueueKnown: true, QueueStart: rec.start}, false, nil, 0
	}
	te := t.tab.Get(trace)
	add := 1
	if te != nil && te.Value.count() == 0 {
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
	for _, h := range e.heldPhases {
		out = append(out, Released{Traces: h.td, Phases: true})
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

// hasStages reports whether the entry keeps records (stages, or engine
// phase spans) that wait StageTTL for their request span.
func (e *entry) hasStages() bool {
	if len(e.phases) > 0 {
		return true
	}
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
	case e.holding():
		t.tab.Reweigh(te, e.weight())
	case e.hasStages():
		t.tab.Reweigh(te, e.weight())
		t.tab.Move(te, listStages, now)
	default:
		t.tab.Remove(te)
	}
}

// Expire releases request spans whose wait is over and forgets stage
// records past their TTL. timedOut counts the released request spans,
// unclaimed the engine phase records forgotten without their request span.
func (t *Table) Expire(now time.Time) (out []Released, timedOut, unclaimed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tab.Expire(now, func(x *tracetable.Entry[*entry]) {
		out = releaseAll(out, x.Value)
		timedOut += len(x.Value.held)
		unclaimed += x.Value.unclaimed()
	})
	return out, timedOut, unclaimed
}

// Drain releases everything held, for shutdown.
func (t *Table) Drain() []Released {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Released
	t.tab.Drain(func(x *tracetable.Entry[*entry]) { out = releaseAll(out, x.Value) })
	return out
}

// PhasesSeen reports whether any engine phase span has been offered, so a
// collector that never sees one (every vLLM release so far) pays one
// atomic load per request span and holds nothing.
func (t *Table) PhasesSeen() bool { return t.phasesSeen.Load() }

// SawPhases notes that an engine writes its own phase spans, where they came
// in the same batch as their request span and need no record.
func (t *Table) SawPhases() {
	if !t.phasesSeen.Load() {
		t.phasesSeen.Store(true)
	}
}

// EnginePhases records that parent, a request span of trace, has phase
// spans its engine wrote itself. If parent's synthetic phase spans are
// held, they are dropped (superseded is true); otherwise the record waits
// StageTTL for the request span (TakePhases). Evicted entries' held spans
// are returned.
func (t *Table) EnginePhases(trace pcommon.TraceID, parent pcommon.SpanID, now time.Time) (superseded bool, evictedOut []Released, evicted int) {
	t.phasesSeen.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	te := t.tab.Get(trace)
	rec := phaseRec{parent: parent}
	if te != nil {
		e := te.Value
		if i := slices.IndexFunc(e.heldPhases, func(h heldPhases) bool { return h.parent == parent }); i >= 0 {
			// The held set gives way to a claimed record: same weight.
			e.heldPhases = slices.Delete(e.heldPhases, i, i+1)
			e.phases = append(e.phases, phaseRec{parent: parent, claimed: true})
			t.settle(te, now)
			return true, nil, 0
		}
		if e.phase(parent) >= 0 {
			return false, nil, 0
		}
	}
	evicted = t.tab.MakeRoom(1, te, evictOrder, func(x *tracetable.Entry[*entry]) { evictedOut = releaseAll(evictedOut, x.Value) })
	if te = t.tab.Get(trace); te == nil {
		t.tab.Add(trace, listStages, 1, &entry{phases: []phaseRec{rec}}, now)
		return false, evictedOut, evicted
	}
	te.Value.phases = append(te.Value.phases, rec)
	t.tab.Reweigh(te, te.Value.weight())
	return false, evictedOut, evicted
}

// TakePhases reports whether the engine's phase spans for parent came
// before it, and marks the record claimed.
func (t *Table) TakePhases(trace pcommon.TraceID, parent pcommon.SpanID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	te := t.tab.Get(trace)
	if te == nil {
		return false
	}
	i := te.Value.phase(parent)
	if i < 0 {
		return false
	}
	te.Value.phases[i].claimed = true
	return true
}

// HoldPhases holds td, the synthetic phase spans of parent, for Wait: if
// the engine's own phase spans for parent come meanwhile (EnginePhases),
// td is dropped; otherwise Expire releases it. Evicted entries' held spans
// are returned.
func (t *Table) HoldPhases(trace pcommon.TraceID, parent pcommon.SpanID, td ptrace.Traces, now time.Time) (evictedOut []Released, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	te := t.tab.Get(trace)
	evicted = t.tab.MakeRoom(1, te, evictOrder, func(x *tracetable.Entry[*entry]) { evictedOut = releaseAll(evictedOut, x.Value) })
	h := heldPhases{parent: parent, td: td}
	if te = t.tab.Get(trace); te == nil {
		t.tab.Add(trace, listHeld, 1, &entry{heldPhases: []heldPhases{h}}, now)
		return evictedOut, evicted
	}
	e := te.Value
	e.heldPhases = append(e.heldPhases, h)
	t.tab.Reweigh(te, e.weight())
	if te.List() != listHeld {
		t.tab.Move(te, listHeld, now)
	}
	return evictedOut, evicted
}
