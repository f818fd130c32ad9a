// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacyprocessor // import "github.com/inferprof/inferprof/processor/privacyprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/inferprof/inferprof/internal/privacy"
	"github.com/inferprof/inferprof/processor/privacyprocessor/internal/metadata"
)

type scrubber struct {
	s         *privacy.Scrubber
	telemetry *metadata.TelemetryBuilder
}

func newScrubber(set processor.Settings, cfg *Config) (*scrubber, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &scrubber{s: privacy.NewScrubber(cfg.Attributes, cfg.Events), telemetry: tb}, nil
}

func (p *scrubber) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	p.count(ctx, p.s.Traces(td))
	return td, nil
}

func (p *scrubber) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	p.count(ctx, p.s.Logs(ld))
	return ld, nil
}

func (p *scrubber) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	p.count(ctx, p.s.Metrics(md))
	return md, nil
}

func (p *scrubber) count(ctx context.Context, r privacy.Removed) {
	if r.Attributes > 0 {
		p.telemetry.ProcessorPrivacyRemovedAttributes.Add(ctx, int64(r.Attributes))
	}
	if r.Events > 0 {
		p.telemetry.ProcessorPrivacyRemovedEvents.Add(ctx, int64(r.Events))
	}
	if r.Bodies > 0 {
		p.telemetry.ProcessorPrivacyRemovedBodies.Add(ctx, int64(r.Bodies))
	}
	if r.ErrorTexts > 0 {
		p.telemetry.ProcessorPrivacyRemovedErrorTexts.Add(ctx, int64(r.ErrorTexts))
	}
}

func (p *scrubber) shutdown(context.Context) error {
	p.telemetry.Shutdown()
	return nil
}
