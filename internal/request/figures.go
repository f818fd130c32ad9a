// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// Figures is what one engine's extractor read from a request span, in the
// processor's terms. A figure that is not ok is unknown and is not written.
type Figures struct {
	TTFT, E2E, Queue, Prefill, Decode, Inference figure
	In, Out, Cached                              figure
	// DecodeQueue is SGLang's decode_waiting under PD disaggregation.
	DecodeQueue figure

	// QueueInPrefill: the engine's prefill figure includes the queue
	// (SGLang), so time in other is e2e − prefill − decode even when the
	// queue itself is unknown.
	QueueInPrefill bool
	// WriteInference: write Inference as gen_ai.latency.time_in_model_inference
	// (TGI's inference_time); other engines' own attribute is left as it is.
	WriteInference bool
	// ErrorType is what the span's shape says about failure (TGI's router
	// span without timings, the journey branch's api.ABORTED), used when
	// neither error.type, the status nor a finish reason says more.
	ErrorType string
	// QueueStart places the queue phase when the engine recorded where it
	// began (TGI: handler start + validation; SGLang: its prefill_waiting
	// stage); 0 when unknown.
	QueueStart pcommon.Timestamp
	// Phases, when set, are placed from the engine's own timestamps (vLLM's
	// journey events) instead of derived from the figures.
	Phases Phases
}

// Queue is a queue time taken from SGLang's stage spans, if known: the
// prefill_waiting stage for a unified or PD-prefill root, decode_waiting for
// a PD-decode root (see join).
type Queue struct {
	Seconds float64
	Known   bool
	// Start is where the stage began, 0 when unknown.
	Start pcommon.Timestamp
}

// Phase is one synthetic phase span's place on the timeline.
type Phase struct {
	Start, End pcommon.Timestamp
	OK         bool
}

// Phases are the queue, prefill and decode spans to draw under a request.
type Phases struct {
	Queue, Prefill, Decode Phase
}

func phase(start, end int64) Phase {
	if start <= 0 || end <= start {
		return Phase{}
	}
	return Phase{Start: pcommon.Timestamp(start), End: pcommon.Timestamp(end), OK: true}
}

// place derives the phases from the figures: the first token is at arrival
// (the span start) + TTFT, prefill ends there, queue ends where prefill
// starts, and decode runs from the first token to the last. Without a first
// token only the queue is drawn, from where the engine says it began or
// else from arrival.
func (f *Figures) place(span ptrace.Span) Phases {
	if f.Phases != (Phases{}) {
		return f.Phases
	}
	var p Phases
	arrival := int64(span.StartTimestamp())
	if arrival <= 0 || span.EndTimestamp() < span.StartTimestamp() {
		// No sound arrival to place anything from (TensorRT-LLM starts
		// the span at now − e2e, and e2e is -1 when it has none).
		return p
	}
	if f.TTFT.ok && f.Prefill.ok {
		first := arrival + nanos(f.TTFT.v)
		prefillStart := first - nanos(f.Prefill.v)
		if f.Queue.ok {
			queueStart := prefillStart - nanos(f.Queue.v)
			if f.QueueStart != 0 {
				// The engine recorded where the queue was: draw it there,
				// and prefill from its end.
				queueStart = int64(f.QueueStart)
				prefillStart = max(prefillStart, queueStart+nanos(f.Queue.v))
			}
			p.Queue = phase(queueStart, queueStart+nanos(f.Queue.v))
		}
		p.Prefill = phase(prefillStart, first)
		if f.Decode.ok {
			p.Decode = phase(first, first+nanos(f.Decode.v))
		}
		return p
	}
	if f.Queue.ok {
		start := arrival
		if f.QueueStart != 0 {
			start = int64(f.QueueStart)
		}
		p.Queue = phase(start, start+nanos(f.Queue.v))
	}
	return p
}

// PlacePhases places a normalized request span's phases from its canonical
// attributes (gen_ai.latency.time_to_first_token, time_in_queue,
// time_in_model_prefill, time_in_model_decode), by the rule Normalize places
// them with (place), so a consumer after the inference processor that finds
// no phase spans draws the same ones. Two inputs of that rule are not on the
// span and are not used here: the engine's own timestamps (vLLM's journey
// events) and where the engine says the queue began (TGI's validation time,
// SGLang's queue stage); the phase spans, when drawn, carry both.
func PlacePhases(span ptrace.Span) Phases {
	attrs := span.Attributes()
	f := Figures{
		TTFT: canonical(attrs, names.AttrTimeToFirstToken), Queue: canonical(attrs, names.AttrTimeInQueue),
		Prefill: canonical(attrs, names.AttrTimeInPrefill), Decode: canonical(attrs, names.AttrTimeInDecode),
	}
	return f.place(span)
}

// canonical reads a canonical latency: Normalize writes each as a double in
// seconds and removes a bad one, so anything else is unknown.
func canonical(attrs pcommon.Map, key string) figure {
	if v, ok := attrs.Get(key); ok && v.Type() == pcommon.ValueTypeDouble {
		return figure{v.Double(), true}
	}
	return figure{}
}

func nanos(s float64) int64 {
	if s > math.MaxInt64/1e9/4 {
		return math.MaxInt64 / 4
	}
	return int64(math.Round(s * 1e9))
}
