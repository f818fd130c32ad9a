// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"context"

	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
)

// Graph ties the connection's ids of an instantiated CUDA graph to its
// signature: the graph id first, then the executable graph id, so the
// latter wins where the two collide, in Graphsignal's order
// (graph_resource_callback, src/cupti/cupti_activity.cpp @ 40f84e6).
func (h *connHandler) Graph(g cuptiwire.Graph) error {
	c := h.cacheOf()
	sig := h.agg.GraphSignature(g.Signature)
	for _, id := range [...]uint32{g.GraphID, g.ExecID} {
		if !c.SetGraph(id, sig) {
			continue
		}
		if h.tb != nil {
			h.tb.ReceiverCuptiGraphTableResets.Add(h.ctx, 1)
		}
		if !h.graphResetWarned {
			h.graphResetWarned = true
			h.log.Warn("cupti graph id table full (8192 graphs): cleared; launches of graphs instantiated before go up as signature unknown",
				zap.Uint32("pid", h.src.PID), zap.String("host", h.src.Host))
		}
	}
	if g.Flags&cuptiwire.GraphFlagNamesMissing != 0 && !h.graphNamesNoted {
		h.graphNamesNoted = true
		h.log.Info("cupti graph signatures lack kernel names (the driver has no cuFuncGetName): graphs that differ only in their kernels share a signature",
			zap.Uint32("pid", h.src.PID))
	}
	return nil
}

// reportGraphOverflow counts the graph launches that went up as signature
// unknown because the aggregator's signature table was full, and says so
// once.
func (r *cuptiReceiver) reportGraphOverflow(ctx context.Context) {
	ov := r.agg.GraphOverflow()
	if ov <= r.lastGraphOv {
		return
	}
	if r.lastGraphOv == 0 {
		r.set.Logger.Warn("cupti: more distinct CUDA graph signatures than the receiver keeps; launches of new ones go up as signature unknown",
			zap.Int("max_signatures", aggregate.DefaultLimits.MaxSignatures))
	}
	r.tb.ReceiverCuptiGraphSignatureOverflowRecords.Add(ctx, int64(ov-r.lastGraphOv))
	r.lastGraphOv = ov
}
