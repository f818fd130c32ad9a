// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"encoding/binary"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/request"
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
	traceID, parentID := parent.TraceID(), parent.SpanID()
	added := 0
	for _, x := range [...]struct {
		name  string
		phase byte
		p     request.Phase
	}{
		{names.SpanPhaseQueue, 'q', ph.Queue},
		{names.SpanPhasePrefill, 'p', ph.Prefill},
		{names.SpanPhaseDecode, 'd', ph.Decode},
	} {
		if !x.p.OK {
			continue
		}
		s := spans.AppendEmpty()
		s.SetTraceID(traceID)
		s.SetSpanID(phaseSpanID(parentID, x.phase))
		s.SetParentSpanID(parentID)
		s.SetName(x.name)
		s.SetKind(ptrace.SpanKindInternal)
		s.SetStartTimestamp(x.p.Start)
		s.SetEndTimestamp(x.p.End)
		a := s.Attributes()
		a.EnsureCapacity(1) // a make of one entry, not append's growth path
		a.PutBool(names.AttrSynthetic, true)
		added++
	}
	return added
}

// phaseSpanID derives a phase span's id from its parent's, so running the
// same span twice gives the same ids and golden files are stable.
func phaseSpanID(parent pcommon.SpanID, phase byte) pcommon.SpanID {
	// FNV-1a over the parent id then the phase byte, inline: hash/fnv's
	// interface costs a call per Write.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	v := uint64(offset64)
	for _, c := range parent {
		v = (v ^ uint64(c)) * prime64
	}
	v = (v ^ uint64(phase)) * prime64
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
// span whose parent is parent. Only the same export batch is seen: the
// engine ends its phase spans with or before the request span, and the
// Python SDK's BatchSpanProcessor exports in end order, so a phase span in
// an earlier batch than its parent still gets a synthetic twin.
func hasEnginePhases(spans ptrace.SpanSlice, n int, parent pcommon.SpanID) bool {
	for i := 0; i < n; i++ {
		s := spans.At(i)
		if s.ParentSpanID() == parent && enginePhaseNames[s.Name()] {
			return true
		}
	}
	return false
}
