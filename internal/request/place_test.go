// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
)

// TestPlacePhasesIsNormalizesRule: from a normalized span's canonical
// attributes, PlacePhases places what Normalize placed, where Normalize
// placed from those same figures; where the engine said where the queue
// began (TGI's validation time), only the lengths are the same.
func TestPlacePhasesIsNormalizesRule(t *testing.T) {
	const start = 1767225600_000_000_000
	set := &Settings{OperationName: "x", PhaseSpans: true}

	s := newSpan("llm_request", map[string]any{
		names.AttrTimeToFirstToken: 0.35, names.AttrE2E: 2.0, names.AttrTimeInQueue: 0.1,
		names.AttrTimeInPrefill: 0.2, names.AttrTimeInDecode: 1.5,
		"gen_ai.usage.prompt_tokens": int64(10), "gen_ai.usage.completion_tokens": int64(20),
	})
	s.SetStartTimestamp(start)
	s.SetEndTimestamp(start + 2e9)
	r := Normalize(KindVLLM, s, &Resource{}, set, Queue{}, nil)
	want := r.Phases
	assert.True(t, want.Queue.OK && want.Prefill.OK && want.Decode.OK)
	assert.Equal(t, want, PlacePhases(s))

	// Without a first token only the queue is placed, from arrival.
	s = newSpan("llm_request", map[string]any{
		names.AttrE2E: 0.5, names.AttrTimeInQueue: 0.5, names.AttrTimeInPrefill: 0.0,
		names.AttrTimeInDecode: 0.0, "gen_ai.usage.prompt_tokens": int64(10), "gen_ai.usage.completion_tokens": int64(0),
	})
	s.SetStartTimestamp(start)
	s.SetEndTimestamp(start + 5e8)
	r = Normalize(KindVLLM, s, &Resource{}, set, Queue{}, nil)
	assert.Equal(t, r.Phases, PlacePhases(s))

	// TGI: the queue begins validation_time after the span starts; the
	// span's figures alone place it earlier, of the same length.
	s = newSpan("generate", map[string]any{
		"total_time": "2s", "validation_time": "10ms", "queue_time": "100ms", "inference_time": "1.89s",
		"time_per_token": "10ms",
	})
	s.SetStartTimestamp(start)
	s.SetEndTimestamp(start + 2e9)
	r = Normalize(KindTGI, s, &Resource{}, set, Queue{}, nil)
	got := PlacePhases(s)
	assert.True(t, r.Phases.Queue.OK)
	assert.Equal(t, pcommon.Timestamp(start+10e6), r.Phases.Queue.Start)
	assert.Equal(t, pcommon.Timestamp(start), got.Queue.Start, "placed from arrival")
	assert.Equal(t, r.Phases.Queue.End-r.Phases.Queue.Start, got.Queue.End-got.Queue.Start)

	// No canonical figures: nothing placed.
	assert.Equal(t, Phases{}, PlacePhases(newSpan("llm_request", nil)))
}
