// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// tracesExporter keeps request, step and kernel spans for the local
// timeline and, in the opt-in traces mode, uploads every span to the v0
// endpoint through exporterhelper's queue.
type tracesExporter struct {
	lifecycle
	inner exporter.Traces // nil unless traces.enabled
}

func newTracesExporter(s *shared, set exporter.Settings) (*tracesExporter, error) {
	e := &tracesExporter{}
	e.s = s
	if !s.cfg.Traces.Enabled && s.timeline == nil {
		// The shipped configs put this exporter in the traces pipeline;
		// turning the local listener off must not stop the collector.
		set.Logger.Warn("local.endpoint is empty and traces mode is off: spans in this pipeline are neither kept nor uploaded")
	}
	if s.cfg.Traces.Enabled {
		push := func(ctx context.Context, td ptrace.Traces) error {
			req, st := s.enc.Spans(td)
			s.record(ctx, st)
			if len(req.Spans) == 0 {
				return nil
			}
			return s.up.send(ctx, signalsPath, req, td.SpanCount())
		}
		inner, err := exporterhelper.NewTraces(context.Background(), set, s.cfg, push, helperOptions(s.cfg)...)
		if err != nil {
			return nil, err
		}
		e.inner = inner
		e.lifecycle.inner = inner
	}
	return e, nil
}

// Capabilities are exporterhelper's when uploading (its batcher may merge
// requests in place); the timeline alone only reads.
func (e *tracesExporter) Capabilities() consumer.Capabilities {
	if e.inner != nil {
		return e.inner.Capabilities()
	}
	return consumer.Capabilities{MutatesData: false}
}

func (e *tracesExporter) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	// Read for the timeline before queueing: after that, td is the queue's.
	c := e.s.collectTraces(td)
	if e.inner != nil {
		if err := e.inner.ConsumeTraces(ctx, td); err != nil {
			return err
		}
	}
	e.s.apply(ctx, c)
	return nil
}
