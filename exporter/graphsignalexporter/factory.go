// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
)

// NewFactory returns the graphsignal exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
		exporter.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createMetrics(_ context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	s, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	e, err := newMetricsExporter(s, set)
	if err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	return e, nil
}

func createLogs(_ context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	s, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	e, err := newLogsExporter(s, set)
	if err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	return e, nil
}

var errTracesOff = errors.New("traces mode is off: set traces.enabled: true to upload spans to " +
	"Graphsignal's /api/v1/signals/ endpoint, or leave this exporter out of traces pipelines (request spans reach " +
	"Graphsignal through the inference_metrics connector; the timeline is the inferprof_ui exporter's)")

func createTraces(_ context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	if !c.Traces.Enabled {
		return nil, errTracesOff
	}
	s, err := acquire(set, c)
	if err != nil {
		return nil, err
	}
	e, err := newTracesExporter(s, set)
	if err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	return e, nil
}
