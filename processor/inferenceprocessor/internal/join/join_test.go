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

func TestStageFirst(t *testing.T) {
	tb := newTable(10)
	out, ev := tb.AddStage(tid(1), 0.2, t0)
	assert.Empty(t, out)
	assert.Zero(t, ev)
	out, ev = tb.AddStage(tid(1), 0.1, t0) // a retracted request queues twice
	assert.Empty(t, out)
	assert.Zero(t, ev)
	q, known, held, _, _ := tb.AddRequest(tid(1), ptrace.NewTraces(), t0.Add(30*time.Second))
	assert.True(t, known)
	assert.False(t, held)
	assert.InDelta(t, 0.3, q, 1e-12)
	assert.Zero(t, tb.Len())
}

func TestRequestFirst(t *testing.T) {
	tb := newTable(10)
	_, known, held, _, _ := tb.AddRequest(tid(1), ptrace.NewTraces(), t0)
	assert.False(t, known)
	assert.True(t, held)
	out, _ := tb.AddStage(tid(1), 0.25, t0.Add(time.Second))
	require.Len(t, out, 1)
	assert.True(t, out[0].QueueKnown)
	assert.InDelta(t, 0.25, out[0].Queue, 1e-12)
	assert.Zero(t, tb.Len())
}

func TestExpire(t *testing.T) {
	tb := newTable(10)
	tb.AddRequest(tid(1), ptrace.NewTraces(), t0)
	tb.AddStage(tid(2), 0.1, t0)
	out, n := tb.Expire(t0.Add(2999 * time.Millisecond))
	assert.Empty(t, out)
	assert.Zero(t, n)
	out, n = tb.Expire(t0.Add(3 * time.Second))
	require.Len(t, out, 1)
	assert.Equal(t, 1, n)
	assert.False(t, out[0].QueueKnown)
	assert.Equal(t, 1, tb.Len(), "the stage record lives for its TTL")
	_, n = tb.Expire(t0.Add(time.Minute))
	assert.Zero(t, n)
	assert.Zero(t, tb.Len())
}

func TestEvictionPrefersStageRecords(t *testing.T) {
	tb := newTable(2)
	tb.AddRequest(tid(1), ptrace.NewTraces(), t0)
	tb.AddStage(tid(2), 0.1, t0)
	// Full: the stage record goes first, the held request stays.
	_, _, _, out, ev := tb.AddRequest(tid(3), ptrace.NewTraces(), t0)
	assert.Empty(t, out)
	assert.Equal(t, 1, ev)
	// Full of held requests: the oldest is handed back, not dropped.
	out, ev = tb.AddStage(tid(4), 0.1, t0)
	require.Len(t, out, 1)
	assert.Equal(t, 1, ev)
	assert.Equal(t, 2, tb.Len())
	assert.Len(t, tb.Drain(), 1)
	assert.Zero(t, tb.Len())
}

func TestSameTraceTwoRequests(t *testing.T) {
	tb := newTable(10)
	tb.AddRequest(tid(1), ptrace.NewTraces(), t0)
	_, _, held, _, _ := tb.AddRequest(tid(1), ptrace.NewTraces(), t0)
	assert.True(t, held)
	out, _ := tb.AddStage(tid(1), 0.1, t0)
	assert.Len(t, out, 2)
}
