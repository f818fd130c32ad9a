// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfilterprocessor // import "github.com/inferprof/inferprof/processor/stepfilterprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/inferprof/inferprof/processor/stepfilterprocessor/internal/metadata"
)

type filter struct {
	drop      map[string]struct{}
	telemetry *metadata.TelemetryBuilder
}

func newFilter(set processor.Settings, cfg *Config) (*filter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	f := &filter{drop: make(map[string]struct{}, len(cfg.SpanNames)), telemetry: tb}
	for _, n := range cfg.SpanNames {
		f.drop[n] = struct{}{}
	}
	return f, nil
}

func (f *filter) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	var dropped int64
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(s ptrace.Span) bool {
				_, ok := f.drop[s.Name()]
				if ok {
					dropped++
				}
				return ok
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	if dropped > 0 {
		f.telemetry.ProcessorStepFilterDroppedSpans.Add(ctx, dropped)
	}
	if td.ResourceSpans().Len() == 0 {
		// Nothing left to export; processorhelper stops here without error.
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

func (f *filter) shutdown(context.Context) error {
	f.telemetry.Shutdown()
	return nil
}
