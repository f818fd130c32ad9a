// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadata"
	"github.com/inferprof/inferprof/internal/sharedcomponent"
)

// uis holds one UI per configured component: its traces and metrics
// exporters share the stores and the listener.
var uis = sharedcomponent.NewMap[*Config, *ui]()

// NewFactory returns the inferprof_ui exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

func acquire(set exporter.Settings, cfg *Config) (*sharedcomponent.Component[*ui], error) {
	return uis.LoadOrStore(cfg, func() (*ui, error) { return newUI(set, cfg) })
}

// The UI only reads what it is given: the fan-out need not copy for it.
var readOnly = exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false})

var errTimelineOff = errors.New("timeline.enabled is false: spans would be dropped; leave inferprof_ui out of traces pipelines, " +
	"or turn the timeline on")

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	if !c.Timeline.Enabled {
		return nil, errTimelineOff
	}
	s, err := acquire(set, c)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewTraces(ctx, set, cfg, s.Unwrap().consumeTraces, readOnly,
		exporterhelper.WithStart(s.Start), exporterhelper.WithShutdown(s.Shutdown))
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	s, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, s.Unwrap().consumeMetrics, readOnly,
		exporterhelper.WithStart(s.Start), exporterhelper.WithShutdown(s.Shutdown))
}

// createLogs takes error records (the engine's, from inferprof-run, and
// NVML's device events) for the dashboard's list of the last errors.
func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	s, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, set, cfg, s.Unwrap().consumeLogs, readOnly,
		exporterhelper.WithStart(s.Start), exporterhelper.WithShutdown(s.Shutdown))
}
