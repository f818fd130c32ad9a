// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadata"
)

// NewFactory returns the factory of the inference_metrics connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		MetricsFlushInterval:        15 * time.Second,
		AggregationTemporality:      TemporalityCumulative,
		AggregationCardinalityLimit: defaultCardinalityLimit,
		MaxSeriesPerModel:           defaultMaxSeriesPerModel,
		MaxSeriesPerService:         defaultMaxSeriesPerService,
		MetricsExpiration:           defaultMetricsExpiration,
		Exemplars:                   ExemplarsConfig{Enabled: true, MaxPerDataPoint: 5},
		Goodput: GoodputConfig{
			TimeToFirstToken:   2 * time.Second,
			TimePerOutputToken: 100 * time.Millisecond,
		},
		Conversations: ConversationsConfig{Idle: 30 * time.Minute, MaxConversations: 100_000},
	}
}

func createTracesToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	// Tests put a fake clock in the context, as span_metrics' tests do.
	return newConnector(set, cfg.(*Config), next, clockwork.FromContext(ctx))
}
