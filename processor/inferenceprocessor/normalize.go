// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/request"
)

// The request job proper, used by a batch's walk (processor.go) and by the
// SGLang join's release (release.go) alike.

func (p *inferenceProcessor) readResource(res pcommon.Resource) resourceInfo {
	return resourceInfo{facts: request.ReadResource(res, &p.settings)}
}

// normalize writes the canonical attributes on spans.At(k) and appends its
// phase spans to spans; left is how many original spans from k on may get
// phase spans too. What it returns is w's, valid until its next call.
func (p *inferenceProcessor) normalize(ctx context.Context, w *batchWork, kind request.Kind, spans ptrace.SpanSlice, k, left int, ri *resourceInfo, q request.Queue) *request.Result {
	span := spans.At(k)
	t := &w.counts
	r := request.Normalize(kind, span, &ri.facts, &p.settings, q, &w.scratch)
	if r.Processed {
		return r
	}
	if r.Request {
		t.requests[kind]++
	}
	if len(r.Anomalies) > 0 {
		p.countAnomalies(ctx, span, r)
	}
	if p.phaseSpans {
		p.phases(ctx, w, kind, spans, k, left, r.Phases)
	}
	return r
}
