// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

import (
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepwindow"
)

// stepsFound is what the one look-up of a request in the step window found
// beyond its inter-token figures: its share of its steps' GPU time, which
// the GPU join writes, so a request costs one look-up rather than two.
type stepsFound struct {
	gpu    stepwindow.RequestGPU
	looked bool
}

// interTokenLatency rebuilds the request's token times from the steps that
// gave it tokens and writes the inter-token figures on span. When the
// engine's steps are known but the request's have left the window (or were
// partly lost), it says so in inferprof.steps.missing instead of guessing.
// Engines without the step hook get nothing.
// instance is the resource's stepwindow.InstanceKey; id is the span's
// gen_ai.request.id.
func (p *stepFiguresProcessor) interTokenLatency(span ptrace.Span, instance, id string) stepsFound {
	attrs := span.Attributes()
	r := p.steps.Lookup(instance, id,
		span.StartTimestamp().AsTime(), span.EndTimestamp().AsTime())
	found := stepsFound{gpu: r.GPU, looked: true}
	switch r.Status {
	case stepwindow.StatusUnknownInstance:
		return found
	case stepwindow.StatusOK:
	default:
		attrs.PutStr(names.AttrStepsMissing, r.Status.String())
	}
	if r.TokenSteps == 0 {
		return found
	}
	attrs.PutInt(names.AttrDecodeSteps, int64(r.DecodeSteps))
	if len(r.Gaps) == 0 {
		return found
	}
	attrs.PutDouble(names.AttrITLP50, r.P50)
	attrs.PutDouble(names.AttrITLP99, r.P99)
	attrs.PutDouble(names.AttrITLMax, r.Max)
	attrs.PutInt(names.AttrDecodeStalls, int64(r.Stalls))
	if p.maxGaps == 0 {
		return found
	}
	gaps := attrs.PutEmptySlice(names.AttrITLGaps)
	if len(r.Gaps) <= p.maxGaps {
		gaps.EnsureCapacity(len(r.Gaps))
		for _, g := range r.Gaps {
			gaps.AppendEmpty().SetDouble(g)
		}
		return found
	}
	// Over the cap: evenly spaced order statistics, smallest and largest
	// included, so the distribution survives at a bounded size.
	sorted := slices.Clone(r.Gaps)
	slices.Sort(sorted)
	n, last := p.maxGaps, len(sorted)-1
	gaps.EnsureCapacity(n)
	for i := range n {
		idx := last
		if n > 1 {
			idx = int(math.Round(float64(i) * float64(last) / float64(n-1)))
		}
		gaps.AppendEmpty().SetDouble(sorted[idx])
	}
	return found
}
