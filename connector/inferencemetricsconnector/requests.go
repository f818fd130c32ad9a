// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/internal/names"
)

// aggregateRequest adds a request span to its series under the resource
// identity resAttrs; dimensions read the full resource, fullRes.
func (c *metricsConnector) aggregateRequest(now pcommon.Timestamp, resKey aggregate.ResourceKey, resAttrs, fullRes pcommon.Map, span ptrace.Span, r *request, n *counts) {
	st := c.store
	st.BeginKey(resKey, aggregate.KindRequest)
	st.AddKeyPart(r.op)
	st.AddKeyPart(r.provider)
	st.AddKeyPart(r.model)
	st.AddKeyPart(r.errType)
	for _, d := range c.cfg.Dimensions {
		v, changed := labelValue(dimensionValue(d, span.Attributes(), fullRes))
		if changed {
			n.sanitized++
		}
		st.AddKeyPart(v)
	}
	s := st.Lookup()
	if s == nil {
		var fresh bool
		s, fresh = st.CreateModel(now, resKey, resAttrs, aggregate.KindRequest, r.model)
		if fresh {
			c.fillRequestAttributes(s, span, fullRes, r)
		} else {
			n.overflow++
		}
	}

	q := s.Req
	tid, sid, ts := span.TraceID(), span.SpanID(), span.EndTimestamp()
	q.Requests++
	failed := r.errType != ""

	e2e := r.e2e
	if !r.is(hasE2E) {
		e2e = spanSeconds(span)
	}
	q.Duration.ObserveExemplar(e2e, ts, tid, sid)
	if r.is(hasQueue) {
		q.Queue.ObserveExemplar(r.queue, ts, tid, sid)
	}
	if r.is(hasPrefill) {
		q.Prefill.ObserveExemplar(r.prefill, ts, tid, sid)
	}
	if r.is(hasDecode) {
		q.Decode.ObserveExemplar(r.decode, ts, tid, sid)
	}
	if r.is(hasOther) {
		q.Other.ObserveExemplar(r.other, ts, tid, sid)
	}
	if r.is(hasInTok) {
		q.InputTokens.Observe(float64(r.inTok))
		q.InputTokenSum += uint64(r.inTok)
	}
	if r.is(hasOutTok) {
		q.OutputTokens.Observe(float64(r.outTok))
		q.OutputTokenSum += uint64(r.outTok)
	}
	observeGPU(q, r, e2e, ts, tid, sid, n)
	if !failed {
		// Semantic conventions record TTFT and TPOT for successful responses only.
		if r.is(hasTTFT) {
			q.TTFT.ObserveExemplar(r.ttft, ts, tid, sid)
		}
		tpot, hasTpot := r.tpot, r.is(hasTPOT)
		if !hasTpot && r.is(hasDecode) && r.is(hasOutTok) && r.outTok >= 2 {
			// The processor's own definition, for spans it did not finish.
			tpot, hasTpot = r.decode/float64(r.outTok-1), true
		}
		if hasTpot {
			q.TPOT.ObserveExemplar(tpot, ts, tid, sid)
		}
		if r.is(hasGaps) {
			observeGaps(&q.ITL, r.gaps, ts, tid, sid, n)
		}
		if c.good(r, tpot, hasTpot, e2e) {
			q.Goodput++
		}
	}
	s.Touch(now)
}

func observeGaps(h *aggregate.Histogram, gaps pcommon.Slice, ts pcommon.Timestamp, tid pcommon.TraceID, sid pcommon.SpanID, n *counts) {
	for i := 0; i < gaps.Len(); i++ {
		var g float64
		if seconds(gaps.At(i), &g, 1, n) != 0 {
			h.ObserveExemplar(g, ts, tid, sid)
		}
	}
}

// good applies DistServe's goodput rule: a request is good when it meets
// every target set. A target whose figure is missing is missed, except TPOT
// for a request with fewer than 2 output tokens, which has no TPOT to miss.
func (c *metricsConnector) good(r *request, tpot float64, hasTpot bool, e2e float64) bool {
	if c.goodTTFT > 0 && (!r.is(hasTTFT) || r.ttft > c.goodTTFT) {
		return false
	}
	if c.goodTPOT > 0 {
		switch {
		case hasTpot:
			if tpot > c.goodTPOT {
				return false
			}
		case r.is(hasOutTok) && r.outTok < 2:
		default:
			return false
		}
	}
	return c.goodE2E <= 0 || e2e <= c.goodE2E
}

func (c *metricsConnector) fillRequestAttributes(s *aggregate.Series, span ptrace.Span, resAttrs pcommon.Map, r *request) {
	attrs := s.Attributes()
	putNonEmpty(attrs, names.AttrOperationName, r.op)
	putNonEmpty(attrs, names.AttrProviderName, r.provider)
	putNonEmpty(attrs, names.AttrRequestModel, r.model)
	putNonEmpty(attrs, names.AttrErrorType, r.errType)
	for _, d := range c.cfg.Dimensions {
		v, _ := labelValue(dimensionValue(d, span.Attributes(), resAttrs)) // counted in aggregateRequest
		putNonEmpty(attrs, d.Name, v)
	}
	s.IsError = r.errType != ""
}

// observeGPU adds a request's GPU time by category and its CPU-overhead
// share of its duration.
func observeGPU(q *aggregate.RequestStats, r *request, e2e float64, ts pcommon.Timestamp, tid pcommon.TraceID, sid pcommon.SpanID, n *counts) {
	if r.gpuCats != (pcommon.Slice{}) && r.gpuTimes != (pcommon.Slice{}) {
		if r.gpuCats.Len() != r.gpuTimes.Len() {
			n.bad++
		} else {
			for i := 0; i < r.gpuCats.Len(); i++ {
				var sec float64
				c := r.gpuCats.At(i)
				if c.Type() != pcommon.ValueTypeStr || seconds(r.gpuTimes.At(i), &sec, 1, n) == 0 {
					n.bad += b2i(c.Type() != pcommon.ValueTypeStr)
					continue
				}
				q.AddGPUTime(c.Str(), sec)
			}
		}
	}
	if r.is(hasCPUOverhead) && e2e > 0 {
		q.CPUOverheadShare.ObserveExemplar(min(r.cpuOverhead/e2e, 1), ts, tid, sid)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// dimensionValue reads a configured dimension from the span, else the
// resource, else its default; "" leaves it out. A kvlist, array or bytes
// value counts as missing: it would become a label of JSON text that no
// content check reads (issue #30).
func dimensionValue(d Dimension, spanAttrs, resAttrs pcommon.Map) string {
	if v, ok := spanAttrs.Get(d.Name); ok && scalar(v) {
		return valueString(v)
	}
	if v, ok := resAttrs.Get(d.Name); ok && scalar(v) {
		return valueString(v)
	}
	if d.Default != nil {
		return *d.Default
	}
	return ""
}

func scalar(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
		return true
	}
	return false
}

func valueString(v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return v.AsString()
}
