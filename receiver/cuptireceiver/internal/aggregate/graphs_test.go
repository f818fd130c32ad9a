// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/names"
)

func graphRec(id uint32, dev uint16, start, dur uint64) cuptiwire.Record {
	return cuptiwire.Record{Kind: cuptiwire.RecordKindGraph, Device: dev, Stream: 7, Start: start, End: start + dur, GraphID: id}
}

// graphPoint is the duration and launch count of one signature on one device.
func graphPoint(t *testing.T, ps []point, sig string, dev int64) (dur, count float64) {
	t.Helper()
	attrs := map[string]any{names.AttrCUDAGraphSignature: sig, names.AttrCUDADeviceOrdinal: dev}
	dur, ok := find(ps, names.MetricGraphDuration, attrs)
	require.Truef(t, ok, "duration of %s on %d", sig, dev)
	count, ok = find(ps, names.MetricGraphCount, attrs)
	require.Truef(t, ok, "count of %s on %d", sig, dev)
	return dur, count
}

func graphSeries(ps []point) (n int) {
	for _, p := range ps {
		if p.metric == names.MetricGraphDuration {
			n++
		}
	}
	return n
}

// Graph launches are summed per (device, signature): a signature known
// under its graph id and its executable graph id is one series, an id no
// graph frame named is "unknown".
func TestGraphLaunchesPerSignature(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1, Flags: cuptiwire.HelloGraphMode})
	c := NewCache()
	sigA, sigB := a.GraphSignature(0x9e3779b97f4a7c15), a.GraphSignature(0xff)
	assert.Equal(t, sigA, a.GraphSignature(0x9e3779b97f4a7c15), "one index per signature")
	assert.False(t, c.SetGraph(3, sigA))
	assert.False(t, c.SetGraph(17, sigA))
	assert.False(t, c.SetGraph(4, sigB))
	assert.False(t, c.SetGraph(0, sigB), "id 0 is no id")

	a.Add(src, []cuptiwire.Record{graphRec(3, 0, 100, 1000), graphRec(17, 0, 2000, 1500), graphRec(4, 1, 100, 40)}, nil, c)
	a.Add(src, []cuptiwire.Record{graphRec(4, 1, 500, 60), graphRec(99, 0, 5000, 7), graphRec(0, 0, 6000, 3)}, nil, c)
	ps := flatten(a.Flush(10))

	dur, n := graphPoint(t, ps, "9e3779b97f4a7c15", 0)
	assert.InDelta(t, 2500e-9, dur, 1e-15)
	assert.Equal(t, 2.0, n)
	dur, n = graphPoint(t, ps, "00000000000000ff", 1)
	assert.InDelta(t, 100e-9, dur, 1e-15)
	assert.Equal(t, 2.0, n)
	dur, n = graphPoint(t, ps, UnknownSignature, 0)
	assert.InDelta(t, 10e-9, dur, 1e-15)
	assert.Equal(t, 2.0, n)
	assert.Equal(t, 3, graphSeries(ps))
	assert.Zero(t, a.GraphOverflow())

	// A new connection's cache knows none of these ids.
	a.Add(src, []cuptiwire.Record{graphRec(3, 0, 9000, 5)}, nil, NewCache())
	ps = flatten(a.Flush(20))
	_, n = graphPoint(t, ps, UnknownSignature, 0)
	assert.Equal(t, 1.0, n)
	assert.Equal(t, 1, graphSeries(ps))
}

// Past MaxSignatures distinct signatures, a new one's launches go up as
// unknown and are counted; known ones keep their series.
func TestGraphSignatureBound(t *testing.T) {
	t.Parallel()
	lim := DefaultLimits
	lim.MaxSignatures = 2
	a := newAgg(t, 10, lim)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	c := NewCache()
	for i := range uint32(3) {
		c.SetGraph(i+1, a.GraphSignature(uint64(i+1)))
	}
	a.Add(src, []cuptiwire.Record{graphRec(1, 0, 0, 10), graphRec(2, 0, 0, 20), graphRec(3, 0, 0, 30), graphRec(3, 0, 0, 30), graphRec(9, 0, 0, 1)}, nil, c)
	ps := flatten(a.Flush(10))
	_, n := graphPoint(t, ps, "0000000000000001", 0)
	assert.Equal(t, 1.0, n)
	_, n = graphPoint(t, ps, "0000000000000002", 0)
	assert.Equal(t, 1.0, n)
	dur, n := graphPoint(t, ps, UnknownSignature, 0)
	assert.Equal(t, 3.0, n, "the refused signature's two launches and the unnamed one")
	assert.InDelta(t, 61e-9, dur, 1e-15)
	assert.Equal(t, 3, graphSeries(ps))
	assert.Equal(t, uint64(2), a.GraphOverflow(), "only the refused signature's launches are counted")
}

// A connection's graph id table keeps maxGraphIDs ids; a new id past that
// clears it, as Graphsignal's library does, and says so.
func TestGraphIDTableResets(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	c := NewCache()
	sig := a.GraphSignature(42)
	for id := range uint32(maxGraphIDs) {
		require.False(t, c.SetGraph(id+1, sig))
	}
	assert.False(t, c.SetGraph(1, sig), "a known id does not reset a full table")
	assert.True(t, c.SetGraph(maxGraphIDs+1, sig))
	a.Add(src, []cuptiwire.Record{graphRec(1, 0, 0, 10), graphRec(maxGraphIDs+1, 0, 0, 20)}, nil, c)
	ps := flatten(a.Flush(10))
	dur, _ := graphPoint(t, ps, UnknownSignature, 0)
	assert.InDelta(t, 10e-9, dur, 1e-15, "ids before the reset are forgotten")
	dur, _ = graphPoint(t, ps, fmt.Sprintf("%016x", 42), 0)
	assert.InDelta(t, 20e-9, dur, 1e-15)
}

// A refused interval's graph series merge back per signature.
func TestRestoreKeepsGraphSignatures(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	c := NewCache()
	c.SetGraph(5, a.GraphSignature(0xabc))
	a.Add(src, []cuptiwire.Record{graphRec(5, 0, 0, 10), graphRec(6, 0, 0, 1)}, nil, c)
	_, tx := a.FlushTx(10)
	a.Add(src, []cuptiwire.Record{graphRec(5, 0, 100, 30)}, nil, c)
	require.Zero(t, a.Restore(tx))
	ps := flatten(a.Flush(20))
	dur, n := graphPoint(t, ps, "0000000000000abc", 0)
	assert.InDelta(t, 40e-9, dur, 1e-15)
	assert.Equal(t, 2.0, n)
	_, n = graphPoint(t, ps, UnknownSignature, 0)
	assert.Equal(t, 1.0, n)
}

// Graph records among kernels keep Add allocation-free.
func TestAddWithGraphsAllocatesNothing(t *testing.T) {
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{PID: 1, Flags: cuptiwire.HelloGraphMode})
	k := []uint32{0, a.Kernel([]byte("x"))}
	c := NewCache()
	c.SetGraph(7, a.GraphSignature(7))
	recs := make([]cuptiwire.Record, 512)
	for i := range recs {
		recs[i] = cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: uint64(i * 10), End: uint64(i*10 + 5)}
		if i%8 == 0 {
			recs[i] = graphRec(uint32(7+i%16), 0, uint64(i*10), 5) // ids 7 (known) and 15 (unknown)
		}
	}
	a.Add(src, recs, k, c)
	assert.Zero(t, testing.AllocsPerRun(50, func() { a.Add(src, recs, k, c) }))
}
