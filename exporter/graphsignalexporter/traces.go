// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// newTracesExporter is the opt-in traces mode: spans go to the v0 endpoint.
// Spans are never served locally, so exporterhelper's exporter is returned
// as it is, with its own capabilities.
func newTracesExporter(s *shared, set exporter.Settings) (exporter.Traces, error) {
	l := &lifecycle{s: s}
	push := func(ctx context.Context, td ptrace.Traces) error {
		req, st := s.enc.Spans(td)
		s.record(ctx, st)
		if len(req.Spans) == 0 {
			return nil
		}
		return s.up.send(ctx, signalsPath, req, td.SpanCount())
	}
	opts := append(helperOptions(s.cfg),
		exporterhelper.WithStart(func(ctx context.Context, host component.Host) error { return l.Start(ctx, host) }),
		exporterhelper.WithShutdown(l.Shutdown))
	return exporterhelper.NewTraces(context.Background(), set, s.cfg, push, opts...)
}
