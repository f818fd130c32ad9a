// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"
)

// engineRecord is what pricing and the assembly read from an engine request
// span the inference processor normalized: its canonical attributes, which
// hold exactly the figures it computed.
type engineRecord struct {
	model  string
	tokens cost.Tokens
}

func readEngineCall(span ptrace.Span) engineRecord {
	var c engineRecord
	// One walk over the attributes rather than a Get (a walk) per key.
	span.Attributes().Range(func(k string, v pcommon.Value) bool {
		switch k {
		case names.AttrRequestModel:
			if v.Type() == pcommon.ValueTypeStr {
				c.model = v.Str()
			}
		case names.AttrInputTokens:
			c.tokens.In, c.tokens.HasIn = intOf(v)
		case names.AttrOutputTokens:
			c.tokens.Out, c.tokens.HasOut = intOf(v)
		case request.AttrCacheRead:
			c.tokens.Cached, c.tokens.HasCch = intOf(v)
		}
		return true
	})
	return c
}

// intOf reads a token count as Normalize writes it, an int.
func intOf(v pcommon.Value) (int64, bool) {
	if v.Type() != pcommon.ValueTypeInt {
		return 0, false
	}
	return v.Int(), true
}

// enginePhase maps the engine-written phase span names (vLLM's proposed
// request lifecycle tracing, which the inference processor draws no second
// copy of) to their phase.
var enginePhase = map[string]byte{"vllm.request.queue": 'q', "vllm.request.prefill": 'p', "vllm.request.decode": 'd'}

// phaseIndex holds the phase spans of one scope by their request span:
// the inference processor appends a request's phase spans to the request's
// own scope, in the same batch, and an engine that writes its own exports
// them with the request.
type phaseIndex struct {
	built bool
	by    map[pcommon.SpanID]request.Phases
}

// of returns the phases of the engine request span: its phase spans when
// the scope has them, else placed from its canonical attributes by the rule
// the inference processor draws them with (request.PlacePhases).
func (x *phaseIndex) of(spans ptrace.SpanSlice, span ptrace.Span) request.Phases {
	if !x.built {
		x.build(spans)
	}
	if ph, ok := x.by[span.SpanID()]; ok {
		return ph
	}
	return request.PlacePhases(span)
}

func (x *phaseIndex) build(spans ptrace.SpanSlice) {
	x.built = true
	for i := 0; i < spans.Len(); i++ {
		s := spans.At(i)
		which, ok := enginePhase[s.Name()]
		if !ok {
			if !request.IsSyntheticPhase(s) {
				continue
			}
			which = s.Name()[0] // queue, prefill, decode
		}
		if s.ParentSpanID().IsEmpty() {
			continue
		}
		if x.by == nil {
			x.by = map[pcommon.SpanID]request.Phases{}
		}
		ph := x.by[s.ParentSpanID()]
		p := request.Phase{Start: s.StartTimestamp(), End: s.EndTimestamp(), OK: s.EndTimestamp() > s.StartTimestamp() && s.StartTimestamp() > 0}
		switch which {
		case 'q':
			ph.Queue = p
		case 'p':
			ph.Prefill = p
		case 'd':
			ph.Decode = p
		}
		x.by[s.ParentSpanID()] = ph
	}
}
