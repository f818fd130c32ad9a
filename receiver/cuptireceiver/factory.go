// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

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
var (
	sharedMu sync.Mutex
	shared   = map[*Config]*cuptiReceiver{}
)

func getOrCreate(set receiver.Settings, cfg *Config) (*cuptiReceiver, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if r, ok := shared[cfg]; ok {
		return r, nil
	}
	r, err := newReceiver(set, cfg)
	if err != nil {
		return nil, err
	}
	r.release = func() {
		sharedMu.Lock()
		delete(shared, cfg)
		sharedMu.Unlock()
	}
	shared[cfg] = r
	return r, nil
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	r, err := getOrCreate(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	r.nextMetrics = next
	return r, nil
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	r, err := getOrCreate(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	r.nextTraces = next
	return r, nil
}
