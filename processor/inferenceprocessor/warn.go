// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/request"
)

// warnEvery is how often a warning of one kind is repeated after its first
// (internal/loglimit; the kinds are anomaly reasons and a few events).
const warnEvery = time.Minute

// countAnomalies counts a request span's anomalies by reason and warns
// about the first of each reason (then once a minute), so they are seen
// without scraping the collector's own metrics.
func (p *inferenceProcessor) countAnomalies(ctx context.Context, span ptrace.Span, r *request.Result) {
	for _, a := range r.Anomalies {
		reason, key := a, ""
		if i := strings.LastIndexByte(a, ':'); i >= 0 {
			reason, key = a[i+1:], a[:i]
		}
		opts, known := p.anomalyOpts[reason]
		if !known {
			opts = []metric.AddOption{metric.WithAttributes(attribute.String("reason", reason))}
			reason = "other" // keeps the limiter's kinds bounded
		}
		p.tel.ProcessorInferenceAnomalies.Add(ctx, 1, opts...)
		if suppressed, ok := p.warn.Allow("anomaly:"+reason, p.now()); ok {
			p.logger.Warn("Engine request span has a bad value; it was left out and marked in inferprof.anomaly "+
				"(counted in otelcol_processor_inference_anomalies)",
				zap.String("reason", reason), zap.String("attribute", key), zap.String("provider", r.Provider),
				zap.String("span", span.Name()), zap.String("trace_id", span.TraceID().String()),
				zap.Int("similar_suppressed", suppressed), zap.Duration("repeat_every", p.warn.Every()))
		}
	}
}
