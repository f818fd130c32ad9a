// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"encoding/binary"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"
)

// addPhaseSpans appends the queue, prefill and decode spans Normalize placed
// (request.Figures.place) as children of spans.At(k). A phase whose figures
// are unknown was not placed and gets no span. left is how many original
// spans, this one included, may still get theirs: the slice grows once for
// all of them rather than doubling as it goes.
//
// Each span is built field by field: copying a prepared template span
// (ptrace.Span.CopyTo) costs more, as pdata's copy also walks the empty
// events, links and status (callgrind: about 1,000 instructions more per
// request).
func addPhaseSpans(spans ptrace.SpanSlice, k, left int, ph request.Phases) int {
	spans.EnsureCapacity(spans.Len() + 3*left)
	parent := spans.At(k)
	return appendPhaseSpans(spans, parent.TraceID(), parent.SpanID(), ph)
}

// appendPhaseSpans appends the phase spans of the request span parentID to
// spans.
func appendPhaseSpans(spans ptrace.SpanSlice, traceID pcommon.TraceID, parentID pcommon.SpanID, ph request.Phases) int {
	h := parentHash(parentID) // once for the three ids
	return appendPhaseSpan(spans, traceID, parentID, phaseSpanID(h, 'q'), names.SpanPhaseQueue, ph.Queue) +
		appendPhaseSpan(spans, traceID, parentID, phaseSpanID(h, 'p'), names.SpanPhasePrefill, ph.Prefill) +
		appendPhaseSpan(spans, traceID, parentID, phaseSpanID(h, 'd'), names.SpanPhaseDecode, ph.Decode)
}

// appendPhaseSpan appends one phase span, if its figures placed it (p.OK),
// and returns how many it appended.
func appendPhaseSpan(spans ptrace.SpanSlice, traceID pcommon.TraceID, parentID, id pcommon.SpanID, name string, p request.Phase) int {
	if !p.OK {
		return 0
	}
	s := spans.AppendEmpty()
	s.SetTraceID(traceID)
	s.SetSpanID(id)
	s.SetParentSpanID(parentID)
	s.SetName(name)
	s.SetKind(ptrace.SpanKindInternal)
	s.SetStartTimestamp(p.Start)
	s.SetEndTimestamp(p.End)
	a := s.Attributes()
	a.EnsureCapacity(1) // a make of one entry, not append's growth path
	a.PutBool(names.AttrSynthetic, true)
	return 1
}

// A phase span's id is derived from its parent's, so running the same span
// twice gives the same ids and golden files are stable: FNV-1a over the
// parent id then the phase byte, inline (hash/fnv's interface costs a call
// per Write), the parent's part once per request.
const offset64, prime64 = 14695981039346656037, 1099511628211

func parentHash(parent pcommon.SpanID) uint64 {
	v := uint64(offset64)
	for _, c := range parent {
		v = (v ^ uint64(c)) * prime64
	}
	return v
}

func phaseSpanID(h uint64, phase byte) pcommon.SpanID {
	v := (h ^ uint64(phase)) * prime64
	if v == 0 {
		v = 1
	}
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], v)
	return id
}

// enginePhaseNames are the phase spans vLLM writes itself as children of
// llm_request in its proposed request lifecycle tracing (vllm-project/vllm
// PR 44402, tests/tracing/test_request_lifecycle_tracing.py @8d1fa3c4).
// Where the engine wrote them, inferprof adds no second copy.
var enginePhaseNames = map[string]bool{
	"vllm.request.queue": true, "vllm.request.prefill": true, "vllm.request.decode": true,
}

// anyEnginePhase reports whether spans[:n] holds an engine-written phase
// span at all: one pass per scope, so that a batch without any (every vLLM
// release so far) costs no look-up per request.
func anyEnginePhase(spans ptrace.SpanSlice, n int) bool {
	for i := 0; i < n; i++ {
		// The prefix first: a compare, where the map would hash every name.
		if name := spans.At(i).Name(); strings.HasPrefix(name, "vllm.request.") && enginePhaseNames[name] {
			return true
		}
	}
	return false
}

// hasEnginePhases reports whether spans[:n] holds an engine-written phase
// span whose parent is parent: the same-batch case, which needs no join.
// The engine ends its phase spans with or before the request span and the
// Python SDK's BatchSpanProcessor exports in end order, so a batch boundary
// between them puts the phase spans in an earlier batch; an exporter's
// retry, or phase spans from another process, can put them in a later one.
// Both go through the SGLang join's table (offerEnginePhases, phases).
func hasEnginePhases(spans ptrace.SpanSlice, n int, parent pcommon.SpanID) bool {
	for i := 0; i < n; i++ {
		s := spans.At(i)
		if s.ParentSpanID() == parent && enginePhaseNames[s.Name()] {
			return true
		}
	}
	return false
}

// The outcomes of processor_inference_phase_join.
const (
	phaseSuperseded = "superseded"
	phaseEngine     = "engine"
	phaseReleased   = "released"
	phaseUnclaimed  = "unclaimed"
)

var phaseJoinOutcomes = []string{phaseSuperseded, phaseEngine, phaseReleased, phaseUnclaimed}

func outcomeOpts(outcomes []string) map[string][]metric.AddOption {
	m := make(map[string][]metric.AddOption, len(outcomes))
	for _, o := range outcomes {
		m[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))}
	}
	return m
}

func (p *inferenceProcessor) countPhaseJoin(ctx context.Context, outcome string, n int) {
	if n > 0 {
		p.tel.ProcessorInferencePhaseJoin.Add(ctx, int64(n), p.phaseJoinOpts[outcome]...)
	}
}

// offerEnginePhases tells the join about the engine phase spans in
// spans[:n] whose request span is not in the same scope: either it came in
// an earlier batch, and its held synthetic phase spans are dropped, or it
// comes later and will find the record (phases). It returns spans the join
// let go early to make room.
func (p *inferenceProcessor) offerEnginePhases(ctx context.Context, spans ptrace.SpanSlice, n int) []join.Released {
	p.join.SawPhases()
	var out []join.Released
	var last pcommon.SpanID // the engine writes a request's phases side by side
	for i := 0; i < n; i++ {
		s := spans.At(i)
		name := s.Name()
		if !strings.HasPrefix(name, "vllm.request.") || !enginePhaseNames[name] {
			continue
		}
		parent := s.ParentSpanID()
		if parent == last || parent.IsEmpty() || hasSpan(spans, n, i, parent) {
			continue
		}
		last = parent
		superseded, evictedOut, evicted := p.join.EnginePhases(s.TraceID(), parent, p.now())
		if superseded {
			p.countPhaseJoin(ctx, phaseSuperseded, 1)
		}
		if evicted > 0 {
			p.tel.ProcessorInferenceJoinEvictions.Add(ctx, int64(evicted))
		}
		out = append(out, evictedOut...)
	}
	return out
}

// hasSpan reports whether spans[:n] holds the span id. The SDK exports in
// end order, so a request span in the same batch as its phase spans (at
// near) is nearly always right after them: look there before the rest, so a
// batch of such requests is not a scan of the batch per request.
func hasSpan(spans ptrace.SpanSlice, n, near int, id pcommon.SpanID) bool {
	lo, hi := max(0, near-4), min(n, near+5)
	for i := lo; i < hi; i++ {
		if spans.At(i).SpanID() == id {
			return true
		}
	}
	for i := 0; i < n; i++ {
		if (i < lo || i >= hi) && spans.At(i).SpanID() == id {
			return true
		}
	}
	return false
}

// phases gives spans.At(k) its synthetic phase spans, unless its engine
// wrote its own. Same batch: hasEnginePhases. Earlier batch: the join's
// record. Later batch: once any engine has written phase spans, a vLLM
// request's synthetic ones are held for sglang_join.wait, as an SGLang root
// is held for its stages, and sent only if no engine phase span came. Until
// then nothing is held, so engines that write none (vLLM 0.32) see no delay.
func (p *inferenceProcessor) phases(ctx context.Context, w *batchWork, kind request.Kind, spans ptrace.SpanSlice, k, left int, ph request.Phases) {
	span := spans.At(k)
	if w.enginePhases && hasEnginePhases(spans, left+k, span.SpanID()) {
		return
	}
	if p.join == nil || kind != request.KindVLLM || !p.join.PhasesSeen() {
		w.counts.phaseSpans += int64(addPhaseSpans(spans, k, left, ph))
		return
	}
	now := p.now()
	traceID, spanID := span.TraceID(), span.SpanID()
	if p.join.TakePhases(traceID, spanID) {
		p.countPhaseJoin(ctx, phaseEngine, 1)
		return
	}
	if !ph.Queue.OK && !ph.Prefill.OK && !ph.Decode.OK {
		return
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	w.rs.Resource().CopyTo(rs.Resource())
	rs.SetSchemaUrl(w.rs.SchemaUrl())
	ss := rs.ScopeSpans().AppendEmpty()
	w.ss.Scope().CopyTo(ss.Scope())
	ss.SetSchemaUrl(w.ss.SchemaUrl())
	appendPhaseSpans(ss.Spans(), traceID, spanID, ph)
	evictedOut, evicted := p.join.HoldPhases(traceID, spanID, td, now)
	if evicted > 0 {
		p.tel.ProcessorInferenceJoinEvictions.Add(ctx, int64(evicted))
	}
	w.released = append(w.released, evictedOut...)
}
