// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import "fmt"

// CUDA graph launches are summed per graph signature: the structural hash
// the injection library computes when a graph is instantiated, as
// Graphsignal's profiler does (src/cupti/cupti_activity.cpp @ 40f84e6).
// A connection's graph frames tie its graph ids to signatures; a graph
// record looks its id up there.

// Signature indexes: 0 is unknown; sigRefused marks, in a connection's
// table, a signature that found MaxSignatures reached, so its records are
// counted as they land in unknown.
const (
	sigUnknown uint32 = 0
	sigRefused uint32 = ^uint32(0)
)

// maxGraphIDs bounds a connection's table of graph ids, as the library
// bounds its own (Graphsignal's kMaxTrackedGraphs).
const maxGraphIDs = 8192

// GraphSignature returns the index of a CUDA graph signature for
// Cache.SetGraph, registering it. Past MaxSignatures distinct signatures
// the records of a new one go up as unknown, counted (GraphOverflow).
func (a *Aggregator) GraphSignature(sig uint64) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.sigs[sig]; ok {
		return i
	}
	if len(a.sigs) >= a.limits.MaxSignatures {
		return sigRefused
	}
	i := uint32(len(a.sigNames))
	a.sigNames = append(a.sigNames, fmt.Sprintf("%016x", sig)) // Graphsignal's frame name: %016llx
	a.sigs[sig] = i
	return i
}

// signatureName is the frame name of a signature index: 16 hex digits, or
// UnknownSignature.
func (a *Aggregator) signatureName(i uint32) string {
	if int(i) < len(a.sigNames) {
		return a.sigNames[i]
	}
	return UnknownSignature
}

// GraphOverflow returns how many graph records went up as unknown since New
// because MaxSignatures was reached.
func (a *Aggregator) GraphOverflow() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sigOverflow
}

// graphSignature returns the signature index of a graph id on this
// connection (unknown when no frame named it), and whether it is unknown
// because the signature found MaxSignatures reached.
func (c *Cache) graphSignature(id uint32) (sig uint32, refused bool) {
	if sig = c.graphs[id]; sig == sigRefused {
		return sigUnknown, true
	}
	return sig, false
}

// SetGraph ties one of the connection's graph ids (0 is none) to a
// signature index from GraphSignature. The table holds maxGraphIDs ids: a
// new id past that clears it first, as Graphsignal's library does with its
// own, and SetGraph reports the reset.
func (c *Cache) SetGraph(id, sig uint32) (reset bool) {
	if id == 0 {
		return false
	}
	if c.graphs == nil {
		c.graphs = map[uint32]uint32{}
	}
	if _, ok := c.graphs[id]; !ok && len(c.graphs) >= maxGraphIDs {
		clear(c.graphs)
		reset = true
	}
	c.graphs[id] = sig
	return reset
}
