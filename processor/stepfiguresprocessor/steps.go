// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/internal/stepspan"
	"github.com/inferprof/inferprof/internal/stepwindow"
)

// addSteps feeds every engine.step span of td into the step window before
// any request span of td is looked up, so a batch holding both works in
// either order. Step spans pass on to the connector, which turns them into
// step metrics; with the GPU join on, a step whose engine streams CUPTI
// activity is first held for its kernels (gpu.go). It returns whether it
// held any, leaving empty scopes and resources for the caller to remove.
func (p *stepFiguresProcessor) addSteps(ctx context.Context, td ptrace.Traces) bool {
	var st stepwindow.Step // slices reused across the batch; Add copies what it keeps
	var read stepspan.Step // likewise
	added := 0
	var moved []int
	held := false
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			moved = moved[:0]
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if span.Name() != names.SpanEngineStep {
					continue
				}
				p.stepReader.Read(ctx, span, &read, stepspan.Requests|stepspan.Launch)
				var ref stepwindow.Ref
				hasRef := false
				if p.steps != nil {
					key := stepwindow.FromStep(&read, rs.Resource(), &st)
					ref, hasRef = p.steps.AddRef(key, &st)
					added++
				}
				if p.gpu != nil && p.holdStep(ctx, rs, ss, span, &read, ref, hasRef) {
					moved = append(moved, k)
				}
			}
			if len(moved) > 0 {
				spanbatch.RemoveIndexes(spans, moved)
				held = true
			}
		}
	}
	if added > 0 {
		p.tel.ProcessorStepFiguresSteps.Add(ctx, int64(added))
	}
	return held
}
