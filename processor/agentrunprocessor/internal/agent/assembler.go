// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent assembles agent runs from their spans, which arrive across
// batches, in any order (children usually first: a span is exported when it
// ends) and from several processes (the agent, its tools, the engine that
// served its model calls). Per trace it records what each span says (a few
// numbers, not the span) and holds back the spans it must write on: agent
// runs, and model calls, which get the run's agent name for cost
// attribution. A trace is complete when every held span's ancestors reach
// the top of its process (a root, or a server or consumer span); the table
// then waits Wait more for late spans from other processes (the engine's
// exporter flushes on its own clock), writes the figures and releases the
// held spans. A trace that never completes is released after MaxHold with
// what arrived, marked partial. Everything is bounded (MaxSpans in all,
// MaxSpansPerTrace per trace) and counted.
package agent // import "github.com/inferprof/inferprof/processor/agentrunprocessor/internal/agent"

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/tracetable"
)

// The table's lists, in the order they expire.
const (
	lResolved = iota // complete traces waiting Wait for late spans
	lEngine          // traces holding only engine spans, waiting EngineWait for their caller
	lHolding         // traces holding GenAI spans, not complete yet: MaxHold
	lRecords         // traces holding nothing: their records, MaxHold after the last span
)

// evictOrder: records first (a lost record costs one figure), then engine
// spans waiting for their caller, then complete traces, the incomplete last.
var evictOrder = []int{lRecords, lEngine, lResolved, lHolding}

// Active reports whether any trace is being assembled; a plain span is only
// worth recording then.
func (a *Assembler) Active() bool { return a.entries.Load() > 0 }

// Len is what the assembly holds against MaxSpans.
func (a *Assembler) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tab.Len()
}

// TakeStats returns the counts since the last call and resets them.
func (a *Assembler) TakeStats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	a.stats = Stats{}
	return s
}

// Record adds a span the assembly only needs to know about. A Plain span is
// recorded only when its trace is already being assembled.
func (a *Assembler) Record(trace pcommon.TraceID, n Node, now time.Time) []Release {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Release
	te := a.tab.Get(trace)
	if te == nil && n.Role == Plain {
		return nil
	}
	te, out = a.entry(trace, te, 1, now, out)
	a.addNode(te, &n, false)
	a.settle(te, now)
	return out
}

// RecordPlain records, under one lock, the spans of a batch that no GenAI
// instrumentation wrote, for the traces being assembled: they link model
// calls to engine requests, and agent runs to the top of their process.
func (a *Assembler) RecordPlain(spans []ptrace.Span, now time.Time) []Release {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Release
	for _, span := range spans {
		trace := span.TraceID()
		te := a.tab.Get(trace)
		if te == nil {
			continue
		}
		if _, dup := te.Value.nodes[span.SpanID()]; dup {
			continue
		}
		te, out = a.entry(trace, te, 1, now, out)
		n := NewNode(span, Plain)
		a.addNode(te, &n, false)
		a.settle(te, now)
	}
	return out
}

// Hold adds an agent run or a model call, and takes its span out of the
// batch (take is called under the lock) until its trace is released.
func (a *Assembler) Hold(trace pcommon.TraceID, n Node, take func() ptrace.Traces, now time.Time) []Release {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Release
	te, out := a.entry(trace, a.tab.Get(trace), 2, now, out)
	a.hold(te, &n, take)
	a.settle(te, now)
	return out
}

// Engine adds an engine request span that has a parent. When its caller's
// spans were already released, it returns their context at once; when they
// are held, or not seen yet and EngineWait is set, the span is held (take)
// and gets the context when its trace is released.
func (a *Assembler) Engine(trace pcommon.TraceID, n Node, take func() ptrace.Traces, now time.Time) (ctx Context, held bool, out []Release) {
	a.mu.Lock()
	defer a.mu.Unlock()
	te := a.tab.Get(trace)
	if te != nil {
		tr := te.Value
		if call := tr.callOf(&n, a.set.maxHops()); call != nil && call.released {
			ctx = tr.context(call)
			ctx.Known = true
			if ctx.CallPriced {
				a.stats.CostConflicts++
			}
		}
	}
	hold := take != nil && !ctx.Known && (a.set.EngineWait > 0 || te != nil && te.Value.heldGenAI > 0)
	w := 1
	if hold {
		w = 2
	}
	te, out = a.entry(trace, te, w, now, out)
	if hold {
		a.hold(te, &n, take)
	} else {
		a.addNode(te, &n, false)
	}
	a.settle(te, now)
	return ctx, hold, out
}

// Settle looks at the traces touched since the last call: a complete one is
// released now when nothing needs waiting for, or else after Wait.
func (a *Assembler) Settle(now time.Time) []Release {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Release
	for trace := range a.dirty {
		te := a.tab.Get(trace)
		if te == nil || te.List() != lHolding {
			continue
		}
		tr := te.Value
		if !a.complete(tr) {
			continue
		}
		if tr.heldRuns > 0 && a.set.Wait > 0 {
			a.tab.Move(te, lResolved, now)
			continue
		}
		a.tab.Remove(te)
		out = append(out, a.finish(tr, "", now))
		a.keep(te.Trace, tr, now)
	}
	clear(a.dirty)
	a.entries.Store(int64(a.tab.Entries()))
	return out
}

// Expire releases what waited long enough and forgets old records.
func (a *Assembler) Expire(now time.Time) []Release {
	a.mu.Lock()
	defer a.mu.Unlock()
	type due struct {
		trace  pcommon.TraceID
		tr     *traceState
		reason string
	}
	var dues []due
	a.tab.Expire(now, func(te *tracetable.Entry[*traceState]) {
		switch te.List() {
		case lRecords:
			return
		case lHolding:
			a.stats.Timeouts++
			dues = append(dues, due{te.Trace, te.Value, ReasonTimeout})
		default:
			dues = append(dues, due{te.Trace, te.Value, ""})
		}
	})
	// Turns are numbered as traces are released: those released together
	// go in the order they started, so a conversation's turns count in
	// order whichever of their requests arrived first.
	slices.SortStableFunc(dues, func(x, y due) int { return cmpInt(x.tr.start(), y.tr.start()) })
	out := make([]Release, 0, len(dues))
	for _, d := range dues {
		out = append(out, a.finish(d.tr, d.reason, now))
	}
	for _, d := range dues {
		a.keep(d.trace, d.tr, now)
	}
	a.entries.Store(int64(a.tab.Entries()))
	return out
}

// Drain releases everything held, for shutdown.
func (a *Assembler) Drain(now time.Time) []Release {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Release
	a.tab.Drain(func(te *tracetable.Entry[*traceState]) {
		if len(te.Value.held) > 0 {
			out = append(out, a.finish(te.Value, ReasonShutdown, now))
		}
	})
	a.entries.Store(0)
	return out
}

// entry returns the trace's entry, creating it among the records, after
// making room for add more spans.
func (a *Assembler) entry(trace pcommon.TraceID, te *tracetable.Entry[*traceState], add int, now time.Time, out []Release) (*tracetable.Entry[*traceState], []Release) {
	if a.tab.Len()+add > a.tab.Max() {
		a.stats.Evicted += int64(a.tab.MakeRoom(add, te, evictOrder, func(x *tracetable.Entry[*traceState]) {
			if len(x.Value.held) > 0 {
				out = append(out, a.finish(x.Value, ReasonEvicted, now))
			}
		}))
		te = a.tab.Get(trace)
	}
	if te == nil {
		te = a.tab.Add(trace, lRecords, 0, &traceState{traceID: trace, nodes: map[pcommon.SpanID]*Node{}}, now)
	}
	a.dirty[trace] = struct{}{}
	a.entries.Store(int64(a.tab.Entries()))
	return te, out
}

// addNode records n unless its trace is at MaxSpansPerTrace or already has
// that span (a span exported twice keeps its first record).
func (a *Assembler) addNode(te *tracetable.Entry[*traceState], n *Node, force bool) *Node {
	tr := te.Value
	if old, ok := tr.nodes[n.ID]; ok {
		return old
	}
	if !force && len(tr.nodes) >= a.set.MaxSpansPerTrace {
		a.stats.Truncated++
		tr.truncated = true
		return nil
	}
	tr.nodes[n.ID] = n
	a.tab.Reweigh(te, tr.weight())
	return n
}

func (a *Assembler) hold(te *tracetable.Entry[*traceState], n *Node, take func() ptrace.Traces) {
	tr := te.Value
	node := a.addNode(te, n, true)
	if node != n {
		// The same span again: it is released with its twin, unwritten.
		node = &Node{ID: n.ID, Role: Plain, released: true}
	}
	node.held = true
	tr.held = append(tr.held, heldSpan{node: node, td: take()})
	if node.Role == Agent || node.Role == Model {
		tr.heldGenAI++
		if node.Role == Agent {
			tr.heldRuns++
		}
	}
	a.tab.Reweigh(te, tr.weight())
}

// settle puts an entry on the list its state calls for. Lists keep their
// deadline while the state stays: a trace holding spans is bounded by the
// first hold, a record by its last span.
func (a *Assembler) settle(te *tracetable.Entry[*traceState], now time.Time) {
	tr := te.Value
	want := lRecords
	switch {
	case tr.heldGenAI > 0:
		want = lHolding
		if te.List() == lResolved {
			want = lResolved
		}
	case len(tr.held) > 0:
		want = lEngine
	}
	if want != te.List() || want == lRecords {
		a.tab.Move(te, want, now)
	}
}

// keep puts a released trace back as records, when there is room, so late
// engine spans still find their caller.
func (a *Assembler) keep(trace pcommon.TraceID, tr *traceState, now time.Time) {
	if len(tr.nodes) == 0 || a.tab.Len()+tr.weight() > a.tab.Max() || a.tab.Get(trace) != nil {
		return
	}
	a.tab.Add(trace, lRecords, tr.weight(), tr, now)
}

// complete reports whether every held GenAI span's ancestors reach the top
// of its process.
func (a *Assembler) complete(tr *traceState) bool {
	seen := map[pcommon.SpanID]bool{}
	for _, h := range tr.held {
		if h.node.Role != Agent && h.node.Role != Model {
			continue
		}
		if !a.reachesTop(tr, h.node, seen) {
			return false
		}
	}
	return true
}

func (a *Assembler) reachesTop(tr *traceState, n *Node, seen map[pcommon.SpanID]bool) bool {
	var path []pcommon.SpanID
	ok := false
	for hops := 0; ; hops++ {
		if done, known := seen[n.ID]; known {
			ok = done
			break
		}
		if n.boundary() {
			ok = true
			break
		}
		if hops > len(tr.nodes) {
			a.stats.Cycles++
			ok = true // a loop has no top; waiting would not find one
			break
		}
		path = append(path, n.ID)
		p := tr.nodes[n.Parent]
		if p == nil {
			break
		}
		n = p
	}
	for _, id := range path {
		seen[id] = ok
	}
	return ok
}
