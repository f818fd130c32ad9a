// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package cuptiwiretest holds what tests of the CUPTI wire share: an
// implementation of Graphsignal's CUDA graph signature written from its
// source, independent of the C library's (native/cupti/graph_sig.h), so the
// two can be checked against each other.
package cuptiwiretest // import "github.com/inferprof/inferprof/internal/cuptiwire/cuptiwiretest"

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Node is a CUDA graph node: its CUgraphNodeType (cuda.h numbering) and,
// for a kernel node (type 0), the symbol cuFuncGetName gives ("" if none).
type Node struct {
	Type   int
	Symbol string
}

// Kernel is a kernel node.
func Kernel(symbol string) Node { return Node{Type: 0, Symbol: symbol} }

// nodeTypes spells node types as graphNodeTypeToStr does.
var nodeTypes = []string{"kernel", "memcpy", "memset", "host", "child", "empty", "wait", "event", "semsignal", "semwait", "memalloc", "memfree"}

// Typed is a node of another type, by Graphsignal's name for it.
func Typed(name string) Node {
	if i := slices.Index(nodeTypes, name); i > 0 {
		return Node{Type: i}
	}
	return Node{Type: 13} // CU_GRAPH_NODE_TYPE_CONDITIONAL: "other"
}

// GraphsignalSignature is the signature Graphsignal's profiler gives a graph
// of these nodes (giveen/graphsignal src/cupti/cupti_activity.cpp @ 40f84e6,
// graphNodeTypeToStr, compute_graph_signature and fnv1a64_hex): per node a
// key, "kernel[name=<symbol>,calls=" or "<type>[calls=", counted in a
// std::map (byte order), each written as key, count and "];", then FNV-1a 64
// from its offset basis, which it prints with %016llx.
func GraphsignalSignature(nodes []Node) (sig uint64, hex string) {
	counts := map[string]int{}
	for _, n := range nodes {
		t := "other"
		if n.Type >= 0 && n.Type < len(nodeTypes) {
			t = nodeTypes[n.Type]
		}
		if n.Type == 0 {
			counts[t+"[name="+n.Symbol+",calls="]++
		} else {
			counts[t+"[calls="]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var s strings.Builder
	for _, k := range keys {
		s.WriteString(k + strconv.Itoa(counts[k]) + "];")
	}
	sig = graphsignalOffsetBasis
	for _, c := range []byte(s.String()) {
		sig ^= uint64(c)
		sig *= 1099511628211 // FNV's 64-bit prime
	}
	return sig, fmt.Sprintf("%016x", sig)
}

// graphsignalOffsetBasis is the start value fnv1a64_hex uses:
// 1469598103934665603, a digit short of FNV's 64-bit offset basis
// (14695981039346656037, which hash/fnv uses). Graphsignal's frame names
// are hashed from it, so ours must be too.
const graphsignalOffsetBasis uint64 = 1469598103934665603
