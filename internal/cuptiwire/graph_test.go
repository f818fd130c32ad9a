// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// graphing is a collect that also takes graph frames.
type graphing struct {
	collect
	graphs []Graph
}

func (g *graphing) Graph(gr Graph) error {
	g.graphs = append(g.graphs, gr)
	return nil
}

// graphStream is a graph-mode connection as the library sends it: each
// graph frame before the first graph record that uses its ids. Graphsignal
// registers a signature under the CUgraph id and the CUgraphExec id
// (src/cupti/cupti_activity.cpp @ 40f84e6, graph_resource_callback).
func graphStream() []byte {
	b := AppendHelloFlags(nil, 4242, HelloGraphMode, 1_700_000_000_000_000_000, "gpu-node-1")
	b = AppendGraph(b, Graph{GraphID: 3, ExecID: 17, Signature: 0x9e3779b97f4a7c15, Nodes: 64})
	b = AppendGraph(b, Graph{GraphID: 4, Signature: 0x00000000000000ff, Nodes: 8192, Flags: GraphFlagNamesMissing})
	b = AppendRecords2(b, []Record{
		{Kind: RecordKindGraph, Device: 1, Start: 1000, End: 3000, GraphID: 17},
		{Kind: RecordKindGraph, Device: 1, Start: 4000, End: 4500, GraphID: 4},
	})
	return AppendStats(b, Stats{GraphTableResets: 2})
}

func TestGraphFramesRoundTrip(t *testing.T) {
	t.Parallel()
	var g graphing
	d := NewDecoder(bytes.NewReader(graphStream()), &g)
	require.NoError(t, d.Run())
	assert.Equal(t, uint64(5), d.Frames())
	assert.Equal(t, []Graph{
		{GraphID: 3, ExecID: 17, Signature: 0x9e3779b97f4a7c15, Nodes: 64},
		{GraphID: 4, Signature: 0xff, Nodes: 8192, Flags: GraphFlagNamesMissing},
	}, g.graphs)
	require.Len(t, g.recs, 2)
	assert.Equal(t, uint32(17), g.recs[0].GraphID)
	assert.Equal(t, []Stats{{GraphTableResets: 2}}, g.stats)
}

// A handler that does not take graph frames still reads the stream.
func TestGraphFramesSkippedByOlderHandlers(t *testing.T) {
	t.Parallel()
	var c collect
	d := NewDecoder(bytes.NewReader(graphStream()), &c)
	require.NoError(t, d.Run())
	assert.Equal(t, uint64(5), d.Frames())
	assert.Len(t, c.recs, 2)
}

// graphFrame is a graph frame of n payload bytes whose first 24 are g.
func graphFrame(g Graph, n int) []byte {
	p := AppendGraph(nil, g)[HeaderSize:]
	for len(p) < n {
		p = append(p, 0xee)
	}
	return append(AppendHeader(nil, FrameTypeGraph, n), p[:n]...)
}

func TestGraphFrameSizes(t *testing.T) {
	t.Parallel()
	g := Graph{GraphID: 1, ExecID: 2, Signature: 3, Nodes: 4, Flags: 5}
	hello := AppendHelloFlags(nil, 1, HelloGraphMode, 0, "h")
	for _, tt := range []struct {
		name string
		n    int
		ok   bool
	}{
		{"24 bytes", 24, true},
		{"a newer library's 30 bytes, not whole words", 30, true},
		{"256 bytes", 256, true},
		{"23 bytes", 23, false},
		{"257 bytes", 257, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c graphing
			err := NewDecoder(bytes.NewReader(append(append([]byte(nil), hello...), graphFrame(g, tt.n)...)), &c).Run()
			if !tt.ok {
				require.ErrorIs(t, err, ErrBadPayload)
				assert.Empty(t, c.graphs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []Graph{g}, c.graphs, "fields past the known ones are skipped")
		})
	}
	// Checked even when no one takes the frame.
	short := append(append([]byte(nil), hello...), graphFrame(g, 16)...)
	require.ErrorIs(t, NewDecoder(bytes.NewReader(short), &collect{}).Run(), ErrBadPayload)
}

func TestFrameTypesKnown(t *testing.T) {
	t.Parallel()
	for ft := FrameTypeHello; ft <= FrameTypeGraph; ft++ {
		_, err := ParseHeader(AppendHeader(nil, ft, 0))
		require.NoErrorf(t, err, "frame type %d", ft)
	}
	_, err := ParseHeader(AppendHeader(nil, FrameTypeGraph+1, 0))
	require.ErrorIs(t, err, ErrUnknownFrame)
}

// Stats of 64 bytes carry the graph table resets at offset 56; the
// version-1 and 56-byte forms read them as zero.
func TestStatsGraphTableResets(t *testing.T) {
	t.Parallel()
	b := AppendStats(nil, Stats{LaunchesDropped: 7, GraphTableResets: 9})
	h, err := ParseHeader(b)
	require.NoError(t, err)
	assert.Equal(t, uint32(64), h.Length)
	assert.Equal(t, uint64(9), binary.LittleEndian.Uint64(b[HeaderSize+56:]))
	s, err := ParseStats(b[HeaderSize:])
	require.NoError(t, err)
	assert.Equal(t, Stats{LaunchesDropped: 7, GraphTableResets: 9}, s)
	s, err = ParseStats(b[HeaderSize : HeaderSize+56])
	require.NoError(t, err)
	assert.Equal(t, Stats{LaunchesDropped: 7}, s)
}
