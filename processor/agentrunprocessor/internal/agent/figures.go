// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"
)

// joinTolerance is how far an engine request may stick out of the model
// call it is matched to by time (when the link between them was not
// exported): the client's and the engine's clocks differ a little.
const joinTolerance = int64(250e6)

// finish writes the figures on a trace's held spans and returns them. The
// caller has taken the trace out of the table.
func (a *Assembler) finish(tr *traceState, reason string, now time.Time) Release {
	kids := tr.children()
	calls := tr.joinEngines(a)
	callOf := make(map[*Node]*Node, len(calls))
	for call, engines := range calls {
		for _, e := range engines {
			callOf[e] = call
		}
	}
	if reason == "" && tr.truncated {
		reason = ReasonTruncated
	}
	rel := Release{Spans: make([]ptrace.Traces, 0, len(tr.held))}
	var runs []*Node
	// Calls first: an agent run sums the cost its calls were given.
	for pass := 0; pass < 2; pass++ {
		for _, h := range tr.held {
			span := h.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			switch n := h.node; {
			case pass == 0 && n.Role == Model:
				a.finishCall(tr, n, calls[n], span.Attributes())
			case pass == 0 && n.Role == Engine:
				if call := callOf[n]; call != nil {
					WriteContext(span.Attributes(), tr.context(call))
				}
			case pass == 1 && n.Role == Agent:
				f := a.run(tr, n, kids, calls)
				f.write(span.Attributes(), reason)
				a.stats.Runs++
				runs = append(runs, n)
			}
			if pass == 1 {
				rel.Spans = append(rel.Spans, h.td)
			}
		}
	}
	a.turns(tr, runs, now)
	for _, n := range tr.nodes {
		n.released = true
	}
	tr.held, tr.heldGenAI, tr.heldRuns = nil, 0, 0
	tr.released = true
	return rel
}

// finishCall gives a held model call its agent and user, and its price
// when it did not reach one of our engines (an engine's request span
// carries the cost of the calls it served).
func (a *Assembler) finishCall(tr *traceState, n *Node, engines []*Node, attrs pcommon.Map) {
	ctx := tr.context(n)
	if n.User != "" {
		ctx.User = "" // the span names its user already (user.id, ...)
	}
	WriteContext(attrs, ctx)
	if len(engines) > 0 {
		callSplit(n, engines).write(attrs)
		return // the engine span carries the cost
	}
	if a.set.Pricer == nil || n.HasCost {
		return
	}
	if c, ok := a.set.Pricer.Model(n.Model, n.Tokens); ok {
		n.Cost, n.HasCost = c, true
		WriteCost(attrs, c)
	}
}

// split is a model call's time as the engine requests that served it spent
// it: each phase's intervals merged (a retried call has two requests), on
// the engine's clock; other is the rest of the call, on the caller's. A
// phase no engine reported (TensorRT-LLM has no prefill/decode split) is
// left out, and other with it.
type split struct {
	queue, prefill, decode []Interval
	has                    [3]bool
	callNs                 int64
}

func callSplit(n *Node, engines []*Node) split {
	s := split{callNs: n.duration()}
	for _, e := range engines {
		s.queue, s.prefill, s.decode = appendOK(s.queue, e.Queue), appendOK(s.prefill, e.Prefill), appendOK(s.decode, e.Decode)
		s.has[0], s.has[1], s.has[2] = s.has[0] || e.HasQueue, s.has[1] || e.HasPrefill, s.has[2] || e.HasDec
	}
	return s
}

func (s split) write(attrs pcommon.Map) {
	rest := s.callNs // in ns, so other is not rounding noise when the phases fill the call
	for i, ph := range [...]struct {
		key string
		in  []Interval
	}{{names.AttrCallTimeInQueue, s.queue}, {names.AttrCallTimeInPrefill, s.prefill}, {names.AttrCallTimeInDecode, s.decode}} {
		if s.has[i] {
			ns := lengthNs(union(ph.in))
			attrs.PutDouble(ph.key, float64(ns)/1e9)
			rest -= ns
		}
	}
	if s.has == [3]bool{true, true, true} {
		attrs.PutDouble(names.AttrCallTimeInOther, float64(max(0, rest))/1e9)
	}
}

// WriteCost writes a request's cost.
func WriteCost(attrs pcommon.Map, c cost.Cost) {
	attrs.PutDouble(names.AttrRequestCost, c.Value)
	attrs.PutStr(names.AttrRequestCostCurrency, c.Currency)
	attrs.PutStr(names.AttrRequestCostMethod, c.Method)
}

// WriteContext adds the agent name and user a request span lacks.
func WriteContext(attrs pcommon.Map, ctx Context) {
	if _, ok := attrs.Get(names.AttrAgentName); !ok && ctx.AgentName != "" {
		attrs.PutStr(names.AttrAgentName, ctx.AgentName)
	}
	if _, ok := attrs.Get(names.AttrEndUserID); !ok && ctx.User != "" {
		attrs.PutStr(names.AttrEndUserID, ctx.User)
	}
}

// context is a request's nearest agent and user, walking up from n.
func (tr *traceState) context(n *Node) Context {
	var ctx Context
	ctx.CallPriced = n.Role == Model && n.HasCost
	for hops, cur := 0, n; cur != nil && hops < 256; hops++ {
		if ctx.User == "" {
			ctx.User = cur.User
		}
		if ctx.AgentName == "" && cur.Role == Agent {
			ctx.AgentName = cur.AgentName
			if ctx.AgentName == "" {
				ctx.AgentName = cur.Name
			}
		}
		if ctx.User != "" && ctx.AgentName != "" || cur.Parent == cur.ID {
			break
		}
		cur = tr.nodes[cur.Parent]
	}
	return ctx
}

// children indexes the nodes by parent, each list in start order (then by
// id), so sums and ties come out the same whatever order spans came in.
func (tr *traceState) children() map[pcommon.SpanID][]*Node {
	kids := make(map[pcommon.SpanID][]*Node, len(tr.nodes))
	for _, n := range tr.nodes {
		if !n.Parent.IsEmpty() && n.Parent != n.ID {
			kids[n.Parent] = append(kids[n.Parent], n)
		}
	}
	for _, k := range kids {
		slices.SortFunc(k, byStart)
	}
	return kids
}

func byStart(x, y *Node) int {
	switch {
	case x.Start != y.Start:
		return cmpInt(x.Start, y.Start)
	case x.End != y.End:
		return cmpInt(x.End, y.End)
	}
	return bytes.Compare(x.ID[:], y.ID[:])
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// callOf finds the model call an engine request served: up its parents (an
// HTTP client span usually sits between), stopping at any other GenAI span.
func (tr *traceState) callOf(e *Node, maxHops int) *Node {
	cur := e
	for range maxHops {
		p := tr.nodes[cur.Parent]
		if p == nil || p == cur {
			return nil
		}
		switch p.Role {
		case Model:
			return p
		case Agent, Tool, Step, Engine:
			return nil
		}
		cur = p
	}
	return nil
}

// joinEngines maps model calls to the engine requests that served them:
// through the parent links, or, where a link was not exported, the one model
// call whose time holds the request's.
func (tr *traceState) joinEngines(a *Assembler) map[*Node][]*Node {
	calls := map[*Node][]*Node{}
	var models []*Node
	var orphans []*Node
	for _, n := range tr.nodes {
		switch n.Role {
		case Model:
			models = append(models, n)
		case Engine:
			if call := tr.callOf(n, a.set.maxHops()); call != nil {
				calls[call] = append(calls[call], n)
			} else {
				orphans = append(orphans, n)
			}
		}
	}
	for _, e := range orphans {
		var match *Node
		for _, m := range models {
			if m.Start-joinTolerance <= e.Start && e.End <= m.End+joinTolerance {
				if match != nil {
					match = nil // two calls could have made it: say nothing
					break
				}
				match = m
			}
		}
		if match == nil {
			if !e.released {
				a.stats.Unjoined++
			}
			continue
		}
		calls[match] = append(calls[match], e)
	}
	for _, engines := range calls {
		slices.SortFunc(engines, byStart)
	}
	return calls
}

// runFigures are one agent run's figures.
type runFigures struct {
	model, tools, other     float64
	queue, prefill, decode  float64
	engineCalls             int
	modelCalls, toolCalls   int
	toolErrors              int
	bottleneck              string
	cost                    float64
	currency                string
	costOK, costMixed       bool
	hasEngine               bool
	bottleneckNs, bottStart int64
}

// run walks the run's subtree: model calls, tool calls (nested agents count
// by their own calls), and the engine requests its calls reached. The
// bottleneck is among the run's children: its model calls, tool calls and
// nested runs, seen through the spans that only group them (chains, graph
// nodes, the agent's own spans), not those calls' or runs' insides.
func (a *Assembler) run(tr *traceState, r *Node, kids map[pcommon.SpanID][]*Node, calls map[*Node][]*Node) runFigures {
	var f runFigures
	var model, tool, queue, prefill, decode []Interval
	type visit struct {
		n     *Node
		child bool // reached from the run through grouping spans only
	}
	seen := map[*Node]bool{r: true}
	var stack []visit
	push := func(n *Node, child bool) {
		for _, k := range kids[n.ID] {
			stack = append(stack, visit{k, child})
		}
	}
	push(r, true)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		n := v.n
		stack = stack[:len(stack)-1]
		if seen[n] {
			a.stats.Cycles++
			continue
		}
		seen[n] = true
		if v.child && (n.Role == Model || n.Role == Tool || n.Role == Agent) {
			f.step(n)
		}
		switch n.Role {
		case Model:
			f.modelCalls++
			model = append(model, clip(n, r))
			engines := calls[n]
			for _, e := range engines {
				f.engineCalls++
				queue, prefill, decode = appendOK(queue, e.Queue), appendOK(prefill, e.Prefill), appendOK(decode, e.Decode)
				if e.HasCost {
					f.addCost(e.Cost)
				}
			}
			if len(engines) == 0 && n.HasCost {
				f.addCost(n.Cost)
			}
		case Tool:
			f.toolCalls++
			if n.Failed {
				f.toolErrors++
			}
			tool = append(tool, clip(n, r))
		}
		push(n, v.child && (n.Role == Step || n.Role == Plain))
	}
	mu := union(model)
	tu := union(tool)
	f.model = length(mu)
	f.tools = length(tu) - length(intersect(tu, mu))
	f.other = max(0, float64(r.duration())/1e9-f.model-f.tools)
	f.hasEngine = f.engineCalls > 0
	f.queue, f.prefill, f.decode = length(union(queue)), length(union(prefill)), length(union(decode))
	return f
}

// step keeps the longest child (the earliest of equals).
func (f *runFigures) step(n *Node) {
	d := n.duration()
	if f.bottleneck == "" || d > f.bottleneckNs || d == f.bottleneckNs && n.Start < f.bottStart {
		f.bottleneck, f.bottleneckNs, f.bottStart = n.Name, d, n.Start
	}
}

func (f *runFigures) addCost(c cost.Cost) {
	switch {
	case !f.costOK:
		f.cost, f.currency, f.costOK = c.Value, c.Currency, true
	case c.Currency == f.currency:
		f.cost += c.Value
	default:
		f.costMixed = true
	}
}

func (f *runFigures) write(attrs pcommon.Map, reason string) {
	attrs.PutDouble(names.AttrAgentTimeInModel, f.model)
	attrs.PutDouble(names.AttrAgentTimeInTools, f.tools)
	attrs.PutDouble(names.AttrAgentTimeInOther, f.other)
	attrs.PutInt(names.AttrAgentModelCalls, int64(f.modelCalls))
	attrs.PutInt(names.AttrAgentToolCalls, int64(f.toolCalls))
	if f.toolErrors > 0 {
		attrs.PutInt(names.AttrAgentToolErrors, int64(f.toolErrors))
	}
	if f.bottleneck != "" {
		attrs.PutStr(names.AttrAgentBottleneck, f.bottleneck)
	}
	if f.hasEngine {
		attrs.PutInt(names.AttrAgentEngineCalls, int64(f.engineCalls))
		attrs.PutDouble(names.AttrAgentTimeInQueue, f.queue)
		attrs.PutDouble(names.AttrAgentTimeInPrefill, f.prefill)
		attrs.PutDouble(names.AttrAgentTimeInDecode, f.decode)
	}
	if f.costOK && !f.costMixed {
		attrs.PutDouble(names.AttrAgentCost, f.cost)
		attrs.PutStr(names.AttrAgentCostCurrency, f.currency)
	}
	if reason != "" {
		attrs.PutStr(names.AttrAgentPartial, reason)
	}
}

// clip is n's time within the run's.
func clip(n, r *Node) Interval {
	return Interval{Start: max(n.Start, r.Start), End: min(n.End, r.End)}
}

func appendOK(s []Interval, i Interval) []Interval {
	if i.ok() {
		s = append(s, i)
	}
	return s
}

// union merges intervals into disjoint ones, in order.
func union(in []Interval) []Interval {
	var s []Interval
	for _, i := range in {
		if i.ok() {
			s = append(s, i)
		}
	}
	slices.SortFunc(s, func(x, y Interval) int {
		switch {
		case x.Start < y.Start:
			return -1
		case x.Start > y.Start:
			return 1
		}
		return 0
	})
	out := s[:0]
	for _, i := range s {
		if n := len(out); n > 0 && i.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, i.End)
			continue
		}
		out = append(out, i)
	}
	return out
}

// intersect is the overlap of two unions.
func intersect(x, y []Interval) []Interval {
	var out []Interval
	for i, j := 0, 0; i < len(x) && j < len(y); {
		s, e := max(x[i].Start, y[j].Start), min(x[i].End, y[j].End)
		if e > s {
			out = append(out, Interval{s, e})
		}
		if x[i].End < y[j].End {
			i++
		} else {
			j++
		}
	}
	return out
}

func length(s []Interval) float64 { return float64(lengthNs(s)) / 1e9 }

func lengthNs(s []Interval) int64 {
	var ns int64
	for _, i := range s {
		ns += i.End - i.Start
	}
	return ns
}
