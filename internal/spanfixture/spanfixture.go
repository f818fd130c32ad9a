// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package spanfixture holds test-only builders of engine export batches:
// each builder follows the engine's tracing code it cites, line by line (the
// call order, the attribute order of its dicts, its defaults and its float64
// arithmetic). The processors' tests build their testdata/spans fixtures
// with it, and Check proves each file byte for byte against its generator.
//
// Only tests import it; the collector binary does not
// (go list -deps ./cmd/otelcol-inferprof shows no spanfixture).
package spanfixture // import "github.com/inferprof/inferprof/internal/spanfixture"

import (
	"encoding/hex"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// T0 is the wall-clock second all fixtures start at (2026-01-01T00:00:00Z).
const T0 = 1767225600.0

// NS is Python's int(seconds * 1e9), as the engines convert.
func NS(seconds float64) int64 { return int64(seconds * 1e9) }

// Batch is one export batch under construction: one resource, one scope.
// Each is what one engine process's BatchSpanProcessor sends in one call.
type Batch struct {
	td    ptrace.Traces
	spans ptrace.SpanSlice
}

// NewBatch starts a batch of one resource, with the attributes resource
// (alternating keys and values, see Put), and one scope.
func NewBatch(scope string, resource ...any) *Batch {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	Put(rs.Resource().Attributes(), resource...)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	return &Batch{td: td, spans: ss.Spans()}
}

// Span appends a span; ids are hex, parent may be "".
func (b *Batch) Span(name string, kind ptrace.SpanKind, trace, id, parent string, start, end int64) ptrace.Span {
	s := b.spans.AppendEmpty()
	s.SetName(name)
	s.SetKind(kind)
	s.SetTraceID(pcommon.TraceID(mustHex(trace, 16)))
	s.SetSpanID(pcommon.SpanID(mustHex(id, 8)))
	if parent != "" {
		s.SetParentSpanID(pcommon.SpanID(mustHex(parent, 8)))
	}
	s.SetStartTimestamp(pcommon.Timestamp(start))
	s.SetEndTimestamp(pcommon.Timestamp(end))
	return s
}

// Len is the number of spans in the batch so far.
func (b *Batch) Len() int { return b.spans.Len() }

// Traces is the batch; later changes to it show in the batch.
func (b *Batch) Traces() ptrace.Traces { return b.td }

// Event appends an event to s, with attributes kv as Put takes them.
func Event(s ptrace.Span, name string, ts int64, kv ...any) {
	e := s.Events().AppendEmpty()
	e.SetName(name)
	e.SetTimestamp(pcommon.Timestamp(ts))
	Put(e.Attributes(), kv...)
}

// Put sets alternating keys and values, in order, the way a Python dict of
// attributes (insertion-ordered) reaches the OTLP exporter.
func Put(m pcommon.Map, kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case string:
			m.PutStr(k, v)
		case int:
			m.PutInt(k, int64(v))
		case int64:
			m.PutInt(k, v)
		case float64:
			m.PutDouble(k, v)
		case bool:
			m.PutBool(k, v)
		default:
			panic(fmt.Sprintf("put: %s has type %T", k, v))
		}
	}
}

func mustHex(s string, n int) []byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		panic("bad id " + s)
	}
	return b
}
