// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/internal/names"
	inferreq "github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/stepspan"
)

// ConsumeTraces aggregates request and engine.step spans; it passes every
// other span by.
func (c *metricsConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := pcommon.NewTimestampFromTime(c.clock.Now())
	var n counts
	c.mu.Lock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		fullRes := rs.Resource().Attributes()
		resAttrs := c.identity(fullRes)
		var resKey aggregate.ResourceKey
		hashed := false
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if inferreq.IsSyntheticPhase(span) {
					// The inference processor's phase spans (three of every
					// four spans of an engine's batch) are neither requests
					// nor steps: skipped before parseRequest (callgrind: 190
					// instructions each when they were parsed).
					continue
				}
				var r request
				isStep := span.Name() == names.SpanEngineStep
				isReq := !isStep && parseRequest(span, &r, &n)
				if !isStep && r.has&(hasCost|hasAgent) != 0 {
					if !hashed {
						resKey = c.hashResource(resAttrs)
						hashed = true
					}
					c.aggregateAgentCost(now, resKey, resAttrs, span, &r, &n)
				}
				if !isStep && !isReq {
					continue
				}
				if !hashed {
					resKey = c.hashResource(resAttrs)
					hashed = true
				}
				n.spans++
				if isStep {
					c.aggregateStep(ctx, now, resKey, resAttrs, span, &n)
				} else {
					c.aggregateRequest(now, resKey, resAttrs, fullRes, span, &r, &n)
				}
			}
		}
	}
	c.series.Store(int64(c.store.Len()))
	c.windowSpans += n.spans
	n.overflow += c.turnOverflow
	c.turnOverflow = 0
	c.mu.Unlock()
	if n.earlyConversations > 0 {
		c.telemetry.ConnectorInferenceMetricsConversationsEarly.Add(ctx, n.earlyConversations)
	}
	if n.bad > 0 {
		c.telemetry.ConnectorInferenceMetricsBadValues.Add(ctx, n.bad)
	}
	if n.overflow > 0 {
		c.telemetry.ConnectorInferenceMetricsOverflowSpans.Add(ctx, n.overflow)
		c.overflowLog.note(c.clock.Now(), n.overflow)
	}
	if n.sanitized > 0 {
		c.telemetry.ConnectorInferenceMetricsSanitizedLabels.Add(ctx, n.sanitized)
	}
	return nil
}

func (c *metricsConnector) aggregateStep(ctx context.Context, now pcommon.Timestamp, resKey aggregate.ResourceKey, resAttrs pcommon.Map, span ptrace.Span, n *counts) {
	rd := &c.step
	c.steps.Read(ctx, span, rd, stepspan.Batch)
	st := c.store
	st.BeginKey(resKey, aggregate.KindStep)
	s := st.Lookup()
	if s == nil {
		var fresh bool
		if s, fresh = st.Create(now, resKey, resAttrs, aggregate.KindStep); !fresh {
			n.overflow++
		}
	}
	p := s.Step
	p.Steps++
	p.Duration.ObserveExemplar(spanSeconds(span), span.EndTimestamp(), span.TraceID(), span.SpanID())
	// A batch size needs one of its halves; the other, absent, counts 0.
	if rd.PrefillRequests != stepspan.Absent || rd.DecodeRequests != stepspan.Absent {
		p.BatchSize.Observe(float64(max(rd.PrefillRequests, 0) + max(rd.DecodeRequests, 0)))
	}
	if rd.ScheduledTokens != stepspan.Absent {
		p.Tokens.Observe(float64(rd.ScheduledTokens))
	}
	p.Preemptions += uint64(max(rd.Preempted, 0))
	s.Touch(now)
}
