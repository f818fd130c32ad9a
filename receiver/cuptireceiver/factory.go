// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/inferprof/inferprof/internal/sharedcomponent"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// NewFactory returns the factory of the cupti receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
		receiver.WithTraces(createTraces, metadata.TracesStability),
	)
}

// One receiver (one socket) serves both the metrics and the traces
// pipeline that name the same config, as the otlp receiver does.
var receivers = sharedcomponent.NewMap[*Config, *cuptiReceiver]()

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	r, err := receivers.LoadOrStore(c, func() (*cuptiReceiver, error) { return newReceiver(set, c) })
	if err != nil {
		return nil, err
	}
	r.Unwrap().nextMetrics = next
	return r, nil
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	c := cfg.(*Config)
	r, err := receivers.LoadOrStore(c, func() (*cuptiReceiver, error) { return newReceiver(set, c) })
	if err != nil {
		return nil, err
	}
	r.Unwrap().nextTraces = next
	return r, nil
}
