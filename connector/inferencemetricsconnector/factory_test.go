// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadata"
)

func TestDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 15*time.Second, cfg.MetricsFlushInterval)
	assert.Equal(t, TemporalityCumulative, cfg.AggregationTemporality)
	assert.Equal(t, 1000, cfg.AggregationCardinalityLimit)
	assert.Equal(t, 200, cfg.MaxSeriesPerModel)
	assert.Equal(t, 250, cfg.MaxSeriesPerService)
	assert.Equal(t, 5*time.Minute, cfg.MetricsExpiration)
	assert.True(t, cfg.Exemplars.Enabled)
	assert.Equal(t, 5, cfg.Exemplars.MaxPerDataPoint)
	assert.Equal(t, 2*time.Second, cfg.Goodput.TimeToFirstToken)
	assert.Equal(t, 100*time.Millisecond, cfg.Goodput.TimePerOutputToken)
	assert.Zero(t, cfg.Goodput.E2E)
	require.NoError(t, cfg.Validate())
}

func TestCreateTracesToMetrics(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.TracesToMetricsStability, f.TracesToMetricsStability())
	c, err := f.CreateTracesToMetrics(t.Context(), connectortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.False(t, c.Capabilities().MutatesData)
	require.NoError(t, c.Shutdown(t.Context()))
}
