// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// busyPoint is the busy time point of a flush.
func busyPoint(t *testing.T, m pmetric.Metrics) pmetric.NumberDataPoint {
	t.Helper()
	require.Equal(t, 1, m.ResourceMetrics().Len())
	ms := m.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == "inferprof.gpu.busy.time" {
			return ms.At(i).Sum().DataPoints().At(0)
		}
	}
	require.FailNow(t, "no busy time point")
	return pmetric.NumberDataPoint{}
}

// Two Kineto traces read at two scans, an idle flush and a refused one
// between them: the second trace's points start at the first's end, the
// last end the next consumer took, so Prometheus adds them.
func TestKinetoTracesContinueTheirSeries(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindKineto})
	k := []uint32{0, a.Kernel([]byte("k"))}
	const sec = uint64(1e9)
	base := uint64(1_700_000_000) * sec
	trace := func(lo uint64) {
		recs := []cuptiwire.Record{{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: lo, End: lo + sec}}
		a.AddTrace(src, recs, k, NewCache(), true)
		a.AddTraceRange(src, lo, lo+sec)
		a.AddBusy(src, 0, sec)
	}

	trace(base)
	first := busyPoint(t, a.Flush(pcommon.Timestamp(base+10*sec)))
	assert.Equal(t, pcommon.Timestamp(base), first.StartTimestamp(), "a new series starts at its trace")
	assert.Equal(t, pcommon.Timestamp(base+sec), first.Timestamp())
	assert.Zero(t, a.Flush(pcommon.Timestamp(base+20*sec)).DataPointCount(), "idle")

	trace(base + 30*sec)
	_, tx := a.FlushTx(pcommon.Timestamp(base + 40*sec))
	a.Restore(tx) // refused: its ends are not kept
	second := busyPoint(t, a.Flush(pcommon.Timestamp(base+50*sec)))
	assert.Equal(t, first.Timestamp(), second.StartTimestamp())
	assert.Equal(t, pcommon.Timestamp(base+31*sec), second.Timestamp())
	assert.InDelta(t, 1.0, second.DoubleValue(), 1e-9)

	// A trace older than the series' last end starts a new series rather
	// than a point that ends before it starts.
	trace(base + 5*sec)
	old := busyPoint(t, a.Flush(pcommon.Timestamp(base+60*sec)))
	assert.Equal(t, pcommon.Timestamp(base+5*sec), old.StartTimestamp())
	assert.Less(t, old.StartTimestamp(), old.Timestamp())
	trace(base + 70*sec)
	next := busyPoint(t, a.Flush(pcommon.Timestamp(base+80*sec)))
	assert.Equal(t, second.Timestamp(), next.StartTimestamp(), "the series goes on from its latest end")
}

// Series idle past the horizon are forgotten, so the table does not grow
// with every kernel name ever seen.
func TestSeriesEndsExpire(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	k := []uint32{0, a.Kernel([]byte("k"))}
	a.Add(src, []cuptiwire.Record{{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 1, End: 2}}, k, NewCache())
	const sec = pcommon.Timestamp(1e9)
	now := pcommon.Timestamp(1_700_000_000) * sec
	require.NotZero(t, a.Flush(now).DataPointCount())
	require.NotEmpty(t, a.ends)
	a.Flush(now + sec)
	require.NotEmpty(t, a.ends, "an idle series is kept within the horizon")
	a.Flush(now + pcommon.Timestamp(seriesHorizon) + 2*sec)
	assert.Empty(t, a.ends)
}
