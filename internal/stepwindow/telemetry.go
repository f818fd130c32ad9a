// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/stepwindow/internal/metadata"
)

// RegisterTelemetry reports the window's Stats as internal metrics of the
// component that owns it (processor_inference_step_window_*, see
// documentation.md), read when the metrics are collected, until Close.
func (w *Window) RegisterTelemetry(set component.TelemetrySettings) error {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return err
	}
	observe := func(f func(Stats) int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(f(w.Stats()))
			return nil
		}
	}
	err = errors.Join(
		tb.RegisterProcessorInferenceStepWindowInstancesCallback(observe(func(s Stats) int64 { return int64(s.Instances) })),
		tb.RegisterProcessorInferenceStepWindowEnginesCallback(observe(func(s Stats) int64 { return int64(s.Engines) })),
		tb.RegisterProcessorInferenceStepWindowStepsCallback(observe(func(s Stats) int64 { return int64(s.Steps) })),
		tb.RegisterProcessorInferenceStepWindowRecordsCallback(observe(func(s Stats) int64 { return int64(s.Records) })),
		tb.RegisterProcessorInferenceStepWindowSourcesCallback(observe(func(s Stats) int64 { return int64(s.Sources) })),
		tb.RegisterProcessorInferenceStepWindowEvictedStepsCallback(observe(func(s Stats) int64 { return int64(s.EvictedSteps) })),
		tb.RegisterProcessorInferenceStepWindowEvictedEnginesCallback(observe(func(s Stats) int64 { return int64(s.EvictedInstances) })),
		tb.RegisterProcessorInferenceStepWindowEvictedSourcesCallback(observe(func(s Stats) int64 { return int64(s.EvictedSources) })),
	)
	if err != nil {
		tb.Shutdown()
		return err
	}
	w.mu.Lock()
	w.telemetry = tb
	w.mu.Unlock()
	return nil
}

// Close stops reporting the window's telemetry. It is safe on a nil Window
// and more than once.
func (w *Window) Close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	tb := w.telemetry
	w.telemetry = nil
	w.mu.Unlock()
	if tb != nil {
		tb.Shutdown()
	}
}
