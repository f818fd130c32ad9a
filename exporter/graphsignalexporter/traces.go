// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/sharedcomponent"
)

// tracesExporter, in the opt-in traces mode (the only one it is built in),
// uploads every span to the v0 endpoint through exporterhelper's queue.
type tracesExporter struct {
	lifecycle
	inner exporter.Traces
}

func newTracesExporter(sc *sharedcomponent.Component[*shared], set exporter.Settings) (*tracesExporter, error) {
	s := sc.Unwrap()
	e := &tracesExporter{}
	e.s, e.sc = s, sc
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
	return e, nil
}

// Capabilities are exporterhelper's (its batcher may merge requests in
// place).
func (e *tracesExporter) Capabilities() consumer.Capabilities { return e.inner.Capabilities() }

func (e *tracesExporter) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return e.inner.ConsumeTraces(ctx, td)
}
