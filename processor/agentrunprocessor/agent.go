// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/internal/stepwindow"
	"github.com/inferprof/inferprof/internal/ticker"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/agent"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/genai"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// Reasons counted in processor_agent_run_incomplete.
var incompleteReasons = []string{"timeout", "evicted", "truncated", "cycle", "unjoined", "conversation_evicted"}

// warnEvery is how often a warning of one kind is repeated after its first
// (internal/loglimit).
const warnEvery = time.Minute

type agentRunProcessor struct {
	logger *zap.Logger
	next   consumer.Traces
	tel    *metadata.TelemetryBuilder
	agents *agent.Assembler // nil when agents.enabled is false
	pricer *cost.Pricer     // nil when nothing is priced

	// warn rate-limits the warning about refused releases.
	warn *loglimit.Limiter

	// for tests
	now  func() time.Time
	tick time.Duration

	// Precomputed metric options, so counting allocates nothing.
	incompleteOpts map[string][]metric.AddOption // by reason

	loop     ticker.Loop // the assembly's releases
	stopOnce sync.Once
}

// batchState is what one batch collects for the agent assembly.
type batchState struct {
	// plain are the spans no GenAI instrumentation wrote, recorded at the
	// end of the batch for the traces being assembled by then (an HTTP
	// client span ends, so comes, before the model call above it). Only
	// held spans are moved out of a batch, so these stay valid.
	plain   []ptrace.Span
	out     []agent.Release // held spans released while the batch ran
	touched bool            // the batch gave the assembly something
}

// genaiSpan classifies a span no engine wrote. An agent run or a model call
// is held (moved out of the batch; it returns true); other
// GenAI spans are recorded; the rest are kept for recording if their trace
// is being assembled.
func (p *agentRunProcessor) genaiSpan(b *batchState, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) bool {
	var info genai.Info
	if !genai.Read(span, &info) {
		b.plain = append(b.plain, span)
		return false
	}
	b.touched = true
	n := agent.NewNode(span, agent.FromGenAI(info.Role))
	n.FromInfo(&info)
	now := p.now()
	switch {
	case n.Role == agent.Model, n.Role == agent.Agent && !info.Done:
		b.out = append(b.out, p.agents.Hold(span.TraceID(), n, spanbatch.Take(rs, ss, span), now)...)
		return true
	}
	b.out = append(b.out, p.agents.Record(span.TraceID(), n, now)...)
	return false
}

// wantsEngineSpan reports whether engineSpan has anything to do with a
// normalized engine request span: price it, or give it to the agent assembly
// (which needs its caller's trace context).
func (p *agentRunProcessor) wantsEngineSpan(span ptrace.Span) bool {
	return p.pricer != nil || p.agents != nil && !span.ParentSpanID().IsEmpty()
}

// engineSpan prices an engine request span and, when its caller sent trace
// context, gives it to the agent assembly, which may hold it (take; it
// returns true) until its caller's spans say which agent and user it served.
// spans are the span's scope's, where its phase spans are (phases indexes
// them).
func (p *agentRunProcessor) engineSpan(b *batchState, span ptrace.Span, ri *resourceInfo, spans ptrace.SpanSlice, phases *phaseIndex, take func() ptrace.Traces) bool {
	r := readEngineCall(span)
	var c cost.Cost
	priced := false
	if p.pricer != nil {
		c, priced = p.pricer.Engine(engineRequest(span, ri, &r))
		if priced {
			agent.WriteCost(span.Attributes(), c)
		}
	}
	if p.agents == nil || span.ParentSpanID().IsEmpty() {
		return false
	}
	b.touched = true
	n := agent.NewNode(span, agent.Engine)
	n.Model = r.model
	ph := phases.of(spans, span)
	n.Queue, n.Prefill, n.Decode = interval(ph.Queue), interval(ph.Prefill), interval(ph.Decode)
	// A phase the engine reported as 0 s has no interval but is known.
	attrs := span.Attributes()
	n.HasQueue, n.HasPrefill, n.HasDec = has(attrs, names.AttrTimeInQueue), has(attrs, names.AttrTimeInPrefill), has(attrs, names.AttrTimeInDecode)
	n.Cost, n.HasCost = c, priced
	ctx, held, out := p.agents.Engine(span.TraceID(), n, take, p.now())
	b.out = append(b.out, out...)
	if held {
		return true
	}
	if ctx.Known {
		agent.WriteContext(span.Attributes(), ctx)
		if ctx.CallPriced && priced {
			// The caller was priced from the price table first; the call
			// is counted once, there.
			attrs := span.Attributes()
			attrs.Remove(names.AttrRequestCost)
			attrs.Remove(names.AttrRequestCostCurrency)
			attrs.Remove(names.AttrRequestCostMethod)
		}
	}
	return false
}

func engineRequest(span ptrace.Span, ri *resourceInfo, r *engineRecord) cost.EngineRequest {
	er := cost.EngineRequest{
		Instance: ri.costInstance, GPU: ri.gpu, GPUCount: ri.gpuCount, Model: r.model,
		Tokens: r.tokens,
		Start:  int64(span.StartTimestamp()), End: int64(span.EndTimestamp()),
	}
	if v, ok := span.Attributes().Get(names.AttrGPUTime); ok {
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			er.GPUTime, er.HasGPUTime = v.Double(), v.Double() >= 0
		case pcommon.ValueTypeInt:
			er.GPUTime, er.HasGPUTime = float64(v.Int()), v.Int() >= 0
		}
	}
	return er
}

// resourceInfo is what the processor reads from a resource for cost: the
// engine instance, and its GPUs when the resource says. The same for all its
// spans, so read once per resource.
type resourceInfo struct {
	costInstance string
	gpu          string
	gpuCount     int
}

func (p *agentRunProcessor) readResource(res pcommon.Resource) resourceInfo {
	var ri resourceInfo
	if p.pricer != nil {
		ri.readCostResource(res)
	}
	return ri
}

// readCostResource reads which engine instance and GPUs a resource's
// request spans ran on.
func (ri *resourceInfo) readCostResource(res pcommon.Resource) {
	attrs := res.Attributes()
	ri.costInstance = stepwindow.InstanceKey(res)
	if v, ok := attrs.Get(names.ResourceGPUName); ok && v.Type() == pcommon.ValueTypeStr {
		ri.gpu = v.Str()
	}
	if v, ok := attrs.Get(names.ResourceGPUCount); ok && v.Type() == pcommon.ValueTypeInt && v.Int() > 0 {
		ri.gpuCount = int(v.Int())
	}
}

func has(attrs pcommon.Map, key string) bool {
	_, ok := attrs.Get(key)
	return ok
}

func interval(ph request.Phase) agent.Interval {
	if !ph.OK {
		return agent.Interval{}
	}
	return agent.Interval{Start: int64(ph.Start), End: int64(ph.End)}
}

// finishBatch records the batch's plain spans, releases the traces it
// completed and sends what was released.
func (p *agentRunProcessor) finishBatch(ctx context.Context, b *batchState) {
	if p.agents == nil || !b.touched && len(b.out) == 0 && (len(b.plain) == 0 || !p.agents.Active()) {
		return
	}
	now := p.now()
	recorded := false
	if len(b.plain) > 0 && p.agents.Active() {
		b.out = append(b.out, p.agents.RecordPlain(b.plain, now)...)
		recorded = true
	}
	if b.touched || recorded {
		b.out = append(b.out, p.agents.Settle(now)...)
	}
	p.sendAgentReleases(ctx, b.out)
}

// sendAgentReleases sends released spans on in a batch of their own: they
// belong to earlier batches, whose senders were answered when they were
// held. A refusal is counted and logged, as groupbytrace does; the
// exporters' sending queues are where retries belong.
func (p *agentRunProcessor) sendAgentReleases(ctx context.Context, rels []agent.Release) {
	p.agentStats(ctx)
	if len(rels) == 0 {
		return
	}
	td := mergeReleases(rels)
	if td.ResourceSpans().Len() == 0 {
		return
	}
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.giveUp(ctx, td, err)
	}
}

func mergeReleases(rels []agent.Release) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range rels {
		for _, one := range r.Spans {
			one.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
	}
	return td
}

// agentStats moves the assembly's counts to the processor's telemetry.
func (p *agentRunProcessor) agentStats(ctx context.Context) {
	if p.agents == nil {
		return
	}
	s := p.agents.TakeStats()
	if s.Runs > 0 {
		p.tel.ProcessorAgentRunRuns.Add(ctx, s.Runs)
	}
	if s.CostConflicts > 0 {
		p.tel.ProcessorAgentRunCostConflicts.Add(ctx, s.CostConflicts)
	}
	for _, c := range [...]struct {
		reason string
		n      int64
	}{
		{"timeout", s.Timeouts}, {"evicted", s.Evicted}, {"truncated", s.Truncated}, {"cycle", s.Cycles},
		{"unjoined", s.Unjoined}, {"conversation_evicted", s.Conversations},
	} {
		if c.n > 0 {
			p.tel.ProcessorAgentRunIncomplete.Add(ctx, c.n, p.incompleteOpts[c.reason]...)
		}
	}
}

func reasonOpts(reasons []string) map[string][]metric.AddOption {
	m := make(map[string][]metric.AddOption, len(reasons))
	for _, r := range reasons {
		m[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))}
	}
	return m
}

// expire releases agent traces whose time is up.
func (p *agentRunProcessor) expire(ctx context.Context, now time.Time) {
	if p.agents != nil {
		p.sendAgentReleases(ctx, p.agents.Expire(now))
	}
}

// giveUp counts and reports spans the next consumer would not take.
func (p *agentRunProcessor) giveUp(ctx context.Context, td ptrace.Traces, err error) {
	p.tel.ProcessorAgentRunReleaseFailures.Add(ctx, int64(td.SpanCount()))
	if suppressed, ok := p.warn.Allow("release_refused", p.now()); ok {
		p.logger.Warn("Next consumer refused spans the agent assembly had held back; they are lost (otelcol_processor_agent_run_release_failures)",
			zap.Int("spans", td.SpanCount()), zap.Int("similar_suppressed", suppressed), zap.Error(err))
	}
}
