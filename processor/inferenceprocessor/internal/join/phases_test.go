// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package join

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func sid(i byte) pcommon.SpanID { return pcommon.SpanID{7: i} }

func TestEnginePhasesBeforeRequest(t *testing.T) {
	tb := newTable(10)
	assert.False(t, tb.PhasesSeen())
	sup, out, ev := tb.EnginePhases(tid(1), sid(1), t0)
	assert.False(t, sup)
	assert.Empty(t, out)
	assert.Zero(t, ev)
	assert.True(t, tb.PhasesSeen())
	_, _, _ = tb.EnginePhases(tid(1), sid(1), t0) // the same request's next phase span
	assert.Equal(t, 1, tb.Len())
	assert.False(t, tb.TakePhases(tid(1), sid(2)), "another request of the trace")
	assert.True(t, tb.TakePhases(tid(1), sid(1)))
	// The request's last phase span, in a batch after the request span.
	sup, out, ev = tb.EnginePhases(tid(1), sid(1), t0.Add(2*time.Second))
	assert.False(t, sup)
	assert.Empty(t, out)
	assert.Zero(t, ev)
	assert.Equal(t, 1, tb.Len(), "one claimed record, kept until stage_ttl")
	_, _, unclaimed := tb.Expire(t0.Add(time.Minute))
	assert.Zero(t, unclaimed, "claimed")
	assert.Zero(t, tb.Len())
}

func TestEnginePhasesAfterHeld(t *testing.T) {
	tb := newTable(10)
	out, ev := tb.HoldPhases(tid(1), sid(1), ptrace.NewTraces(), t0)
	assert.Empty(t, out)
	assert.Zero(t, ev)
	assert.Equal(t, 1, tb.Len())
	sup, _, _ := tb.EnginePhases(tid(1), sid(1), t0.Add(time.Second))
	assert.True(t, sup, "the held synthetic set is dropped")
	assert.Equal(t, 1, tb.Len(), "a claimed record in its place")
	sup, _, _ = tb.EnginePhases(tid(1), sid(1), t0.Add(2*time.Second))
	assert.False(t, sup, "the request's next phase span changes nothing")
	assert.Equal(t, 1, tb.Len())
	rel, timedOut, unclaimed := tb.Expire(t0.Add(time.Hour))
	assert.Empty(t, rel)
	assert.Zero(t, timedOut)
	assert.Zero(t, unclaimed)
}

func TestHeldPhasesReleasedAfterWait(t *testing.T) {
	tb := newTable(10)
	tb.HoldPhases(tid(1), sid(1), ptrace.NewTraces(), t0)
	rel, _, _ := tb.Expire(t0.Add(2999 * time.Millisecond))
	assert.Empty(t, rel)
	rel, timedOut, _ := tb.Expire(t0.Add(3 * time.Second))
	require.Len(t, rel, 1)
	assert.True(t, rel[0].Phases)
	assert.Zero(t, timedOut, "not an SGLang request span")
	assert.Zero(t, tb.Len())
}

func TestEnginePhaseRecordUnclaimed(t *testing.T) {
	tb := newTable(10)
	tb.EnginePhases(tid(1), sid(1), t0)
	tb.EnginePhases(tid(2), sid(2), t0)
	_, _, unclaimed := tb.Expire(t0.Add(time.Minute))
	assert.Equal(t, 2, unclaimed)
	assert.Zero(t, tb.Len())
}

// TestPhasesBounded: phase records and held phase sets count against
// MaxEntries like held spans; a held set pushed out is released, not lost.
func TestPhasesBounded(t *testing.T) {
	tb := newTable(2)
	tb.HoldPhases(tid(1), sid(1), ptrace.NewTraces(), t0)
	tb.EnginePhases(tid(2), sid(2), t0)
	assert.Equal(t, 2, tb.Len())
	_, out, ev := tb.EnginePhases(tid(3), sid(3), t0)
	assert.Equal(t, 1, ev, "the stage-like record goes first")
	assert.Empty(t, out)
	out, ev = tb.HoldPhases(tid(4), sid(4), ptrace.NewTraces(), t0)
	assert.Equal(t, 1, ev)
	assert.Empty(t, out, "again a record, not the held set")
	out, ev = tb.HoldPhases(tid(5), sid(5), ptrace.NewTraces(), t0)
	assert.Equal(t, 1, ev)
	require.Len(t, out, 1, "the oldest held set, released early")
	assert.True(t, out[0].Phases)
	assert.Equal(t, 2, tb.Len())
}

// TestPhasesBesideSGLang: a trace's phase records share the entry with
// SGLang's stages and held roots without disturbing them.
func TestPhasesBesideSGLang(t *testing.T) {
	tb := newTable(10)
	tb.EnginePhases(tid(1), sid(1), t0)
	_, held, _, _ := unified(tb, tid(1), t0)
	require.True(t, held)
	assert.Equal(t, 2, tb.Len())
	out, _ := tb.AddStage(tid(1), PrefillWaiting, 0.1, 1, t0)
	require.Len(t, out, 1)
	assert.False(t, out[0].Phases)
	assert.Equal(t, 1, tb.Len(), "the phase record stays")
	assert.True(t, tb.TakePhases(tid(1), sid(1)))
	_, _, unclaimed := tb.Expire(t0.Add(time.Minute))
	assert.Zero(t, unclaimed)
	assert.Zero(t, tb.Len())
}
