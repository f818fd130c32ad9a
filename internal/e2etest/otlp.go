// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2etest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// Sink is a real OTLP/gRPC server on loopback that keeps what the collector
// under test exports to it. It is core's otlp receiver feeding test sinks.
type Sink struct {
	Endpoint     string // OTLP/gRPC
	HTTPEndpoint string // OTLP/HTTP
	Traces       *consumertest.TracesSink
	Metrics      *consumertest.MetricsSink
	Logs         *consumertest.LogsSink
}

// NewSink starts a sink on a free loopback port; it stops when the test ends.
func NewSink(tb testing.TB) *Sink {
	tb.Helper()
	s := &Sink{
		Endpoint:     "127.0.0.1:" + itoa(FreePort(tb)),
		HTTPEndpoint: "127.0.0.1:" + itoa(FreePort(tb)),
		Traces:       new(consumertest.TracesSink),
		Metrics:      new(consumertest.MetricsSink),
		Logs:         new(consumertest.LogsSink),
	}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = s.Endpoint
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = s.HTTPEndpoint
	set := receivertest.NewNopSettings(f.Type())
	ctx := context.Background()
	// The otlp receiver shares one server per config across signals.
	tr, err := f.CreateTraces(ctx, set, cfg, s.Traces)
	require.NoError(tb, err)
	mr, err := f.CreateMetrics(ctx, set, cfg, s.Metrics)
	require.NoError(tb, err)
	lr, err := f.CreateLogs(ctx, set, cfg, s.Logs)
	require.NoError(tb, err)
	host := componenttest.NewNopHost()
	require.NoError(tb, tr.Start(ctx, host))
	require.NoError(tb, mr.Start(ctx, host))
	require.NoError(tb, lr.Start(ctx, host))
	tb.Cleanup(func() {
		require.NoError(tb, tr.Shutdown(context.Background()))
		require.NoError(tb, mr.Shutdown(context.Background()))
		require.NoError(tb, lr.Shutdown(context.Background()))
	})
	return s
}
