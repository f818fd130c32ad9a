// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	signalsv0 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v0"
	"github.com/inferprof/inferprof/internal/names"
)

// spanTagKeys are the resource attributes that identify where a span ran;
// the rest of the resource stays out of span tags.
var spanTagKeys = []string{
	names.ResourceHostName, names.ResourceServiceName, names.ResourceServiceInstance,
	names.ResourceProcessPID, names.ResourceEngineName, names.ResourceEngineVersion,
}

// Spans encodes td with the v0 schema, the only Graphsignal schema with
// spans. Numeric attributes become counters, other scalars attributes;
// string attributes that can hold prompts or outputs, and events named
// after them, are left out.
func (e *Encoder) Spans(td ptrace.Traces) (*signalsv0.UploadRequest, Stats) {
	req := &signalsv0.UploadRequest{UploadTs: e.now().UnixNano()}
	var tags tagSet
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		rattrs := rs.Resource().Attributes()
		prefix := ""
		if svc := str(rattrs, names.ResourceServiceName); svc != "" {
			prefix = svc + "."
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				tags.reset(e.global)
				for _, key := range spanTagKeys {
					if v := str(rattrs, key); v != "" {
						tags.put(key, v)
					}
				}
				if sp.Status().Code() == ptrace.StatusCodeError {
					tags.put("span.status", "error")
				}
				tags.finish()
				req.Spans = append(req.Spans, e.span(sp, prefix, &tags))
			}
		}
	}
	return req, Stats{Truncated: tags.truncated}
}

func (e *Encoder) span(sp ptrace.Span, prefix string, tags *tagSet) *signalsv0.Span {
	out := &signalsv0.Span{
		SpanId:  hexID(sp.SpanID()),
		TraceId: sp.TraceID().String(),
		StartTs: int64(sp.StartTimestamp()),
		EndTs:   int64(sp.EndTimestamp()),
		Name:    clean(prefix + sp.Name()),
	}
	if !sp.ParentSpanID().IsEmpty() {
		out.ParentSpanId = hexID(sp.ParentSpanID())
	}
	for i := 0; i < sp.Links().Len(); i++ {
		out.LinkedSpanIds = append(out.LinkedSpanIds, hexID(sp.Links().At(i).SpanID()))
	}
	for _, t := range tags.kvs {
		out.Tags = append(out.Tags, &signalsv0.Tag{Key: t.k, Value: t.v})
	}
	out.Attributes, out.Counters = spanAttrs(sp.Attributes())
	for i := 0; i < sp.Events().Len(); i++ {
		ev := sp.Events().At(i)
		if IsContent(ev.Name()) {
			continue
		}
		attrs, counters := spanAttrs(ev.Attributes())
		for _, c := range counters {
			attrs = append(attrs, &signalsv0.Attribute{Name: c.Name, Value: formatFloat(c.Value)})
		}
		out.Events = append(out.Events, &signalsv0.SpanEvent{
			Name: clean(ev.Name()), EventTs: int64(ev.Timestamp()), Attributes: attrs,
		})
	}
	return out
}

func hexID(id pcommon.SpanID) string { return id.String() }

func spanAttrs(m pcommon.Map) ([]*signalsv0.Attribute, []*signalsv0.Counter) {
	var attrs []*signalsv0.Attribute
	var counters []*signalsv0.Counter
	for k, v := range m.All() {
		k = clean(k)
		switch v.Type() {
		case pcommon.ValueTypeInt:
			counters = append(counters, &signalsv0.Counter{Name: k, Value: float64(v.Int())})
		case pcommon.ValueTypeDouble:
			counters = append(counters, &signalsv0.Counter{Name: k, Value: v.Double()})
		case pcommon.ValueTypeStr, pcommon.ValueTypeBool:
			if IsContent(k) {
				continue
			}
			s, _ := cut(clean(v.AsString()), MaxAttr)
			attrs = append(attrs, &signalsv0.Attribute{Name: k, Value: s})
		}
	}
	return attrs, counters
}

func formatFloat(f float64) string {
	v := pcommon.NewValueDouble(f)
	return v.AsString()
}
