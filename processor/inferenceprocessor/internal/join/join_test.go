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

var t0 = time.Unix(1767225600, 0)

func tid(i byte) pcommon.TraceID { return pcommon.TraceID{15: i} }

func newTable(max int) *Table {
	return New(Settings{Wait: 3 * time.Second, StageTTL: time.Minute, MaxEntries: max})
}

// unified offers a unified root.
func unified(tb *Table, trace pcommon.TraceID, now time.Time) (Released, bool, []Released, int) {
	return tb.AddRequest(trace, PrefillWaiting, true, ptrace.NewTraces, now)
}

func TestStageFirst(t *testing.T) {
	tb := newTable(10)
	out, ev := tb.AddStage(tid(1), PrefillWaiting, 0.2, 5, t0)
	assert.Empty(t, out)
	assert.Zero(t, ev)
	out, ev = tb.AddStage(tid(1), PrefillWaiting, 0.1, 9, t0) // an earlier SGLang re-queued a retracted request
	assert.Empty(t, out)
	assert.Zero(t, ev)
	q, held, _, _ := unified(tb, tid(1), t0.Add(30*time.Second))
	assert.True(t, q.QueueKnown)
	assert.False(t, held)
	assert.InDelta(t, 0.3, q.Queue, 1e-12)
	assert.Equal(t, pcommon.Timestamp(5), q.QueueStart, "the first stage's start")
	assert.Zero(t, tb.Len())
}

func TestRequestFirst(t *testing.T) {
	tb := newTable(10)
	q, held, _, _ := unified(tb, tid(1), t0)
	assert.False(t, q.QueueKnown)
	assert.True(t, held)
	out, _ := tb.AddStage(tid(1), PrefillWaiting, 0.25, 7, t0.Add(time.Second))
	require.Len(t, out, 1)
	assert.True(t, out[0].QueueKnown)
	assert.InDelta(t, 0.25, out[0].Queue, 1e-12)
	assert.Equal(t, pcommon.Timestamp(7), out[0].QueueStart)
	assert.Zero(t, tb.Len())
}

// TestUnifiedIgnoresDecodeWaiting: in unified mode decode_waiting is the gap
// after prefill, not queue time; whatever the order, the root gets
// prefill_waiting alone and the trace's records go with it.
func TestUnifiedIgnoresDecodeWaiting(t *testing.T) {
	for name, order := range map[string][]string{
		"stages first":     {"prefill", "decode", "root"},
		"root first":       {"root", "decode", "prefill"},
		"root in between":  {"decode", "root", "prefill"},
		"prefill, root, d": {"prefill", "root", "decode"},
	} {
		t.Run(name, func(t *testing.T) {
			tb := newTable(10)
			var got []Released
			for _, step := range order {
				switch step {
				case "prefill":
					out, _ := tb.AddStage(tid(1), PrefillWaiting, 0.20, 1, t0)
					got = append(got, out...)
				case "decode":
					out, _ := tb.AddStage(tid(1), DecodeWaiting, 0.05, 2, t0)
					got = append(got, out...)
				case "root":
					q, held, _, _ := unified(tb, tid(1), t0)
					if !held {
						got = append(got, q)
					}
				}
			}
			require.Len(t, got, 1)
			assert.InDelta(t, 0.20, got[0].Queue, 1e-12)
			// A decode_waiting that comes after its unified root stays
			// until its TTL; nothing else is left.
			assert.LessOrEqual(t, tb.Len(), 1)
			tb.Expire(t0.Add(time.Minute))
			assert.Zero(t, tb.Len())
		})
	}
}

// TestDisaggregated: under PD both roots share the router's trace; the
// prefill root takes prefill_waiting, the decode root decode_waiting, in
// any order.
func TestDisaggregated(t *testing.T) {
	tb := newTable(10)
	_, held, _, _ := tb.AddRequest(tid(1), DecodeWaiting, false, ptrace.NewTraces, t0)
	require.True(t, held)
	out, _ := tb.AddStage(tid(1), PrefillWaiting, 0.12, 1, t0)
	assert.Empty(t, out, "prefill_waiting is not the decode root's queue")
	q, held, _, _ := tb.AddRequest(tid(1), PrefillWaiting, false, ptrace.NewTraces, t0)
	assert.False(t, held)
	assert.InDelta(t, 0.12, q.Queue, 1e-12)
	out, _ = tb.AddStage(tid(1), DecodeWaiting, 0.08, 2, t0)
	require.Len(t, out, 1)
	assert.InDelta(t, 0.08, out[0].Queue, 1e-12)
	assert.Zero(t, tb.Len())
}

func TestExpire(t *testing.T) {
	tb := newTable(10)
	unified(tb, tid(1), t0)
	tb.AddStage(tid(2), PrefillWaiting, 0.1, 1, t0)
	out, n, _ := tb.Expire(t0.Add(2999 * time.Millisecond))
	assert.Empty(t, out)
	assert.Zero(t, n)
	out, n, _ = tb.Expire(t0.Add(3 * time.Second))
	require.Len(t, out, 1)
	assert.Equal(t, 1, n)
	assert.False(t, out[0].QueueKnown)
	assert.Equal(t, 1, tb.Len(), "the stage record lives for its TTL")
	_, n, _ = tb.Expire(t0.Add(time.Minute))
	assert.Zero(t, n)
	assert.Zero(t, tb.Len())
}

func TestEvictionPrefersStageRecords(t *testing.T) {
	tb := newTable(2)
	unified(tb, tid(1), t0)
	tb.AddStage(tid(2), PrefillWaiting, 0.1, 1, t0)
	// Full: the stage record goes first, the held request stays.
	_, _, out, ev := unified(tb, tid(3), t0)
	assert.Empty(t, out)
	assert.Equal(t, 1, ev)
	// Full of held requests: the oldest is handed back, not dropped.
	out, ev = tb.AddStage(tid(4), PrefillWaiting, 0.1, 1, t0)
	require.Len(t, out, 1)
	assert.Equal(t, 1, ev)
	assert.Equal(t, 2, tb.Len())
	assert.Len(t, tb.Drain(), 1)
	assert.Zero(t, tb.Len())
}

// TestHeldSpansPerTraceRespectMax: many roots under one traceparent count
// one each, so one trace cannot hold more than max_pending spans.
func TestHeldSpansPerTraceRespectMax(t *testing.T) {
	tb := newTable(3)
	released := 0
	for range 10 {
		_, held, out, _ := unified(tb, tid(1), t0)
		require.True(t, held)
		released += len(out)
		assert.LessOrEqual(t, tb.Len(), 3)
	}
	// Each time the trace's entry was full it was handed back whole (3
	// spans, at the 4th, 7th and 10th root); the 10th is held alone.
	assert.Equal(t, 9, released, "what did not fit was handed back")
	out, _ := tb.AddStage(tid(1), PrefillWaiting, 0.1, 1, t0)
	assert.Len(t, out, 1, "the rest leave with their stage")
	assert.Zero(t, tb.Len())
}

func TestSameTraceTwoRequests(t *testing.T) {
	tb := newTable(10)
	unified(tb, tid(1), t0)
	_, held, _, _ := unified(tb, tid(1), t0)
	assert.True(t, held)
	out, _ := tb.AddStage(tid(1), PrefillWaiting, 0.1, 1, t0)
	require.Len(t, out, 2)
	for _, r := range out {
		assert.InDelta(t, 0.1, r.Queue, 1e-12, "both get the stage")
	}
}
