// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/agent"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/request"
)

// maxReleaseAttempts is how often a batch of released spans is offered to
// the next consumer (the first try and the retries on the following ticks)
// before it is counted as refused and let go.
const maxReleaseAttempts = 3

// stage records an SGLang queue stage for the join, and returns request
// spans it releases. Other stages pass untouched.
func (p *inferenceProcessor) stage(ctx context.Context, span ptrace.Span) []join.Released {
	if p.join == nil {
		return nil
	}
	var st join.Stage
	switch span.Name() {
	case request.StagePrefillWaiting:
		st = join.PrefillWaiting
	case request.StageDecodeWaiting:
		st = join.DecodeWaiting
	default:
		return nil
	}
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if end < start || start == 0 {
		// A stage with a broken clock tells us nothing; the request span
		// will be released without a queue time at the end of its wait.
		return nil
	}
	out, evicted := p.join.AddStage(span.TraceID(), st, float64(end-start)/1e9, start, p.now())
	if evicted > 0 {
		p.tel.ProcessorInferenceJoinEvictions.Add(ctx, int64(evicted))
	}
	return out
}

// hold offers an SGLang root span to the join. When its queue stage is not
// known yet, the span is moved out of the batch (left empty, removed later)
// and held.
func (p *inferenceProcessor) hold(ctx context.Context, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) (request.Queue, bool, []join.Released) {
	role, _ := request.SGLangRole(span.Name())
	needs := join.PrefillWaiting
	if role == request.RoleDecode {
		needs = join.DecodeWaiting
	}
	take := takeSpan(rs, ss, span)
	q, wait, evictedOut, evicted := p.join.AddRequest(span.TraceID(), needs, role == request.RoleUnified, take, p.now())
	if evicted > 0 {
		p.tel.ProcessorInferenceJoinEvictions.Add(ctx, int64(evicted))
	}
	if !wait {
		return request.Queue{Seconds: q.Queue, Known: q.QueueKnown, Start: q.QueueStart}, false, evictedOut
	}
	return request.Queue{}, true, evictedOut
}

// takeSpan returns the function that moves span out of the batch into one
// of its own, with its resource and scope. A table holding the span calls it
// only when it holds it, and under its lock, so a concurrent expire never
// reads a batch half made. The emptied place is removed from the batch by
// removeIndexes.
func takeSpan(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) func() ptrace.Traces {
	return func() ptrace.Traces {
		one := ptrace.NewTraces()
		rs2 := one.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(rs2.Resource())
		rs2.SetSchemaUrl(rs.SchemaUrl())
		ss2 := rs2.ScopeSpans().AppendEmpty()
		ss.Scope().CopyTo(ss2.Scope())
		ss2.SetSchemaUrl(ss.SchemaUrl())
		span.MoveTo(ss2.Spans().AppendEmpty())
		return one
	}
}

// expire releases held SGLang request spans whose wait is over, and
// retries released spans the next consumer refused before.
func (p *inferenceProcessor) expire(ctx context.Context, now time.Time) {
	p.retryRefused(ctx)
	if p.join != nil {
		out, timedOut, unclaimed := p.join.Expire(now)
		if timedOut > 0 {
			p.tel.ProcessorInferenceJoinTimeouts.Add(ctx, int64(timedOut))
		}
		p.countPhaseJoin(ctx, phaseUnclaimed, unclaimed)
		p.sendReleased(ctx, out)
	}
	p.expireAgents(ctx, now)
}

// finishReleased normalises released root spans into one batch. They are
// priced and given to the agent assembly, but not held again.
func (p *inferenceProcessor) finishReleased(ctx context.Context, out []join.Released) ptrace.Traces {
	td := ptrace.NewTraces()
	var b batchState
	var w batchWork
	defer w.counts.flush(ctx, p)
	for _, rel := range out {
		if rel.Phases {
			// A vLLM request's synthetic phase spans, made when it was
			// processed; the engine wrote none of its own meanwhile.
			p.countPhaseJoin(ctx, phaseReleased, 1)
			w.counts.phaseSpans += int64(rel.Traces.SpanCount())
			rel.Traces.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
			continue
		}
		rs := rel.Traces.ResourceSpans().At(0)
		ss := rs.ScopeSpans().At(0)
		ri := p.readResource(rs.Resource())
		r, found := p.normalize(ctx, &w, request.KindSGLangRoot, ss.Spans(), 0, 1, &ri,
			request.Queue{Seconds: rel.Queue, Known: rel.QueueKnown, Start: rel.QueueStart})
		span := ss.Spans().At(0)
		if p.gpu != nil && p.requestGPU(ctx, rs, ss, span, &ri, requestID(r), r, false, found) {
			continue // held for its steps' GPU figures; released by tickGPU
		}
		if p.wantsEngineSpan(span, r) {
			p.engineSpan(&b, span, &ri, r, nil)
		}
		rel.Traces.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	if p.agents != nil {
		p.sendAgentReleases(ctx, b.out)
	}
	return td
}

// sendReleased finishes released spans and sends them on in a batch of
// their own. A refusal is retried on the next ticks (queued up to
// sglang_join.max_pending spans), then counted; never dropped silently.
func (p *inferenceProcessor) sendReleased(ctx context.Context, out []join.Released) {
	if len(out) == 0 {
		return
	}
	td := p.finishReleased(ctx, out)
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.refused(ctx, td, 1, err)
	}
}

// flush sends what shutdown releases, and the spans still waiting for a
// retry, once each; what is refused now is counted and reported.
func (p *inferenceProcessor) flush(ctx context.Context, released ptrace.Traces, agentOut []agent.Release) error {
	var errs []error
	batches := p.retry.takeAll()
	if released != (ptrace.Traces{}) && released.ResourceSpans().Len() > 0 {
		batches = append(batches, pending{td: released})
	}
	if td := mergeReleases(agentOut); td.ResourceSpans().Len() > 0 {
		batches = append(batches, pending{td: td})
	}
	for _, b := range batches {
		if err := p.next.ConsumeTraces(ctx, b.td); err != nil {
			p.giveUp(ctx, b.td, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retryRefused offers refused batches again.
func (p *inferenceProcessor) retryRefused(ctx context.Context) {
	for _, b := range p.retry.takeAll() {
		if err := p.next.ConsumeTraces(ctx, b.td); err != nil {
			p.refused(ctx, b.td, b.attempts+1, err)
		}
	}
}

// refused handles a batch the next consumer refused after attempts tries.
func (p *inferenceProcessor) refused(ctx context.Context, td ptrace.Traces, attempts int, err error) {
	if attempts < maxReleaseAttempts && !consumererror.IsPermanent(err) && p.retry.maxSpans > 0 &&
		p.retry.add(pending{td: td, attempts: attempts}) {
		p.tel.ProcessorInferenceReleaseRetries.Add(ctx, int64(td.SpanCount()))
		if suppressed, ok := p.warn.Allow("release_retry", p.now()); ok {
			p.logger.Warn("Next consumer refused spans the processor had held back (SGLang join or agent assembly); retrying on the next tick",
				zap.Int("spans", td.SpanCount()), zap.Int("attempt", attempts), zap.Int("similar_suppressed", suppressed), zap.Error(err))
		}
		return
	}
	p.giveUp(ctx, td, err)
}

// giveUp counts and reports spans the next consumer would not take.
func (p *inferenceProcessor) giveUp(ctx context.Context, td ptrace.Traces, err error) {
	p.tel.ProcessorInferenceReleaseFailures.Add(ctx, int64(td.SpanCount()))
	if suppressed, ok := p.warn.Allow("release_refused", p.now()); ok {
		p.logger.Warn("Next consumer refused spans the processor had held back (SGLang join or agent assembly); they are lost (otelcol_processor_inference_release_failures)",
			zap.Int("spans", td.SpanCount()), zap.Int("similar_suppressed", suppressed), zap.Error(err))
	}
}

// pending is a refused batch waiting for its next try.
type pending struct {
	td       ptrace.Traces
	attempts int
}

// retryQueue holds refused batches, at most maxSpans spans in all.
type retryQueue struct {
	mu       sync.Mutex
	maxSpans int
	spans    int
	batches  []pending
}

func (q *retryQueue) add(b pending) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := b.td.SpanCount()
	if q.spans+n > q.maxSpans {
		return false
	}
	q.spans += n
	q.batches = append(q.batches, b)
	return true
}

func (q *retryQueue) takeAll() []pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.batches
	q.batches, q.spans = nil, 0
	return out
}
