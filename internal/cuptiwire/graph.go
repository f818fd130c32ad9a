// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire // import "github.com/inferprof/inferprof/internal/cuptiwire"

import (
	"encoding/binary"
	"fmt"
)

// GraphFlagNamesMissing says some kernel node had no name in the
// signature (a driver without cuFuncGetName), so structurally different
// graphs may share it.
const GraphFlagNamesMissing uint32 = 1 << 0

// Sizes of a graph frame: 24 bytes now, up to 256 from a newer library
// (the bytes past the known fields are skipped; no word alignment).
const (
	graphLen    = 24
	maxGraphLen = 256
)

// Graph is what the library learnt when a CUDA graph was instantiated
// (CUPTI's GRAPHEXEC_CREATED resource callback). A graph record whose
// GraphID equals GraphID or ExecID carries Signature.
type Graph struct {
	GraphID   uint32 // cuptiGetGraphId of the graph instantiated; 0 unknown
	ExecID    uint32 // cuptiGetGraphExecId of the executable graph; 0 unknown
	Signature uint64 // FNV-1a 64 of Graphsignal's structural signature string
	Nodes     uint32 // nodes the signature covers (at most 8192)
	Flags     uint32 // GraphFlag* bits
}

// ParseGraph decodes a graph payload.
func ParseGraph(p []byte) (Graph, error) {
	if len(p) < graphLen || len(p) > maxGraphLen {
		return Graph{}, fmt.Errorf("graph of %d bytes: %w", len(p), ErrBadPayload)
	}
	return Graph{
		GraphID:   binary.LittleEndian.Uint32(p),
		ExecID:    binary.LittleEndian.Uint32(p[4:]),
		Signature: binary.LittleEndian.Uint64(p[8:]),
		Nodes:     binary.LittleEndian.Uint32(p[16:]),
		Flags:     binary.LittleEndian.Uint32(p[20:]),
	}, nil
}

// AppendGraph appends a whole graph frame.
func AppendGraph(dst []byte, g Graph) []byte {
	dst = AppendHeader(dst, FrameTypeGraph, graphLen)
	dst = binary.LittleEndian.AppendUint32(dst, g.GraphID)
	dst = binary.LittleEndian.AppendUint32(dst, g.ExecID)
	dst = binary.LittleEndian.AppendUint64(dst, g.Signature)
	dst = binary.LittleEndian.AppendUint32(dst, g.Nodes)
	return binary.LittleEndian.AppendUint32(dst, g.Flags)
}

// GraphHandler is what a Handler implements to receive graph frames. A
// Handler without it has them checked and skipped.
type GraphHandler interface {
	Graph(g Graph) error
}
