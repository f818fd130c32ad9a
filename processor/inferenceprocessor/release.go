// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"
)

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
	take := spanbatch.Take(rs, ss, span)
	q, wait, evictedOut, evicted := p.join.AddRequest(span.TraceID(), needs, role == request.RoleUnified, take, p.now())
	if evicted > 0 {
		p.tel.ProcessorInferenceJoinEvictions.Add(ctx, int64(evicted))
	}
	if !wait {
		return request.Queue{Seconds: q.Queue, Known: q.QueueKnown, Start: q.QueueStart}, false, evictedOut
	}
	return request.Queue{}, true, evictedOut
}

// expire releases held SGLang request spans whose wait is over.
func (p *inferenceProcessor) expire(ctx context.Context, now time.Time) {
	if p.join != nil {
		out, timedOut, unclaimed := p.join.Expire(now)
		if timedOut > 0 {
			p.tel.ProcessorInferenceJoinTimeouts.Add(ctx, int64(timedOut))
		}
		p.countPhaseJoin(ctx, phaseUnclaimed, unclaimed)
		p.sendReleased(ctx, out)
	}
}

// finishReleased normalises released root spans into one batch; they are
// not held again.
func (p *inferenceProcessor) finishReleased(ctx context.Context, out []join.Released) ptrace.Traces {
	td := ptrace.NewTraces()
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
		p.normalize(ctx, &w, request.KindSGLangRoot, ss.Spans(), 0, 1, &ri,
			request.Queue{Seconds: rel.Queue, Known: rel.QueueKnown, Start: rel.QueueStart})
		rel.Traces.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	return td
}

// sendReleased finishes released spans and sends them on in a batch of
// their own: they belong to earlier batches, whose senders were answered
// when they were held. A refusal is counted and logged, as groupbytrace
// does; the exporters' sending queues are where retries belong.
func (p *inferenceProcessor) sendReleased(ctx context.Context, out []join.Released) {
	if len(out) == 0 {
		return
	}
	td := p.finishReleased(ctx, out)
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.giveUp(ctx, td, err)
	}
}

// flush sends what shutdown releases, once; what is refused is counted and
// reported.
func (p *inferenceProcessor) flush(ctx context.Context, released ptrace.Traces) error {
	if released.ResourceSpans().Len() == 0 {
		return nil
	}
	if err := p.next.ConsumeTraces(ctx, released); err != nil {
		p.giveUp(ctx, released, err)
		return err
	}
	return nil
}

// giveUp counts and reports spans the next consumer would not take.
func (p *inferenceProcessor) giveUp(ctx context.Context, td ptrace.Traces, err error) {
	p.tel.ProcessorInferenceReleaseFailures.Add(ctx, int64(td.SpanCount()))
	if suppressed, ok := p.warn.Allow("release_refused", p.now()); ok {
		p.logger.Warn("Next consumer refused spans the processor had held back (SGLang join); they are lost (otelcol_processor_inference_release_failures)",
			zap.Int("spans", td.SpanCount()), zap.Int("similar_suppressed", suppressed), zap.Error(err))
	}
}
