// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadata"
)

func TestUnmarshalDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.New().Unmarshal(&cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
	require.NoError(t, cfg.(*Config).Validate())
}

var fileStorageMetrics = component.MustNewIDWithName("file_storage", "metrics")

func TestUnmarshalConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	unknown := "unknown"

	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "", want: createDefaultConfig().(*Config)},
		{name: "full", want: &Config{
			MetricsFlushInterval:         30 * time.Second,
			AggregationTemporality:       TemporalityDelta,
			AggregationCardinalityLimit:  2000,
			MaxSeriesPerModel:            50,
			MaxSeriesPerService:          100,
			MetricsExpiration:            10 * time.Minute,
			ResourceMetricsKeyAttributes: []string{"service.name", "host.name"},
			Dimensions: []Dimension{
				{Name: "inferprof.lora.adapter"},
				{Name: "service.instance.id", Default: &unknown},
			},
			Exemplars: ExemplarsConfig{Enabled: true, MaxPerDataPoint: 3},
			Goodput: GoodputConfig{
				TimeToFirstToken:   500 * time.Millisecond,
				TimePerOutputToken: 50 * time.Millisecond,
				E2E:                20 * time.Second,
			},
			Conversations: ConversationsConfig{Idle: 10 * time.Minute, MaxConversations: 500},
			Metrics:       map[string]MetricConfig{"inferprof.server.other.duration": {Enabled: false}},
			Storage:       &fileStorageMetrics,
		}},
		{name: "span_metrics_temporality", want: func() *Config {
			c := createDefaultConfig().(*Config)
			c.AggregationTemporality = TemporalityDelta
			return c
		}()},
		{name: "bad_temporality", wantErr: `unknown aggregation_temporality "sometimes"`},
		{name: "bad_limit", wantErr: "aggregation_cardinality_limit must be positive"},
		{name: "bad_series_cap", wantErr: "max_series_per_service must not be negative"},
		{name: "bad_interval", wantErr: "metrics_flush_interval must be positive"},
		{name: "bad_metric", wantErr: `unknown metric "gen_ai.server.nope"`},
		{name: "bad_dimension", wantErr: `"gen_ai.request.model" is duplicated or already a default dimension`},
		{name: "bad_exemplars", wantErr: "exemplars.max_per_data_point must be positive"},
		{name: "bad_goodput", wantErr: "goodput targets must not be negative"},
		{name: "bad_conversations", wantErr: "conversations.idle must be positive"},
		{name: "bare_interval", wantErr: "metrics_flush_interval: 15ns is below the minimum of 100ms; did you forget a unit, e.g. 15s?"},
		{name: "typed_interval", wantErr: `metrics_flush_interval: "abc" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			cfg := createDefaultConfig()
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = cfg.(*Config).Validate()
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestTemporalityUnmarshalText(t *testing.T) {
	for in, want := range map[string]Temporality{
		"cumulative":                         TemporalityCumulative,
		"DELTA":                              TemporalityDelta,
		"AGGREGATION_TEMPORALITY_CUMULATIVE": TemporalityCumulative,
	} {
		var got Temporality
		require.NoError(t, got.UnmarshalText([]byte(in)), in)
		assert.Equal(t, want, got, in)
	}
	var bad Temporality
	require.Error(t, bad.UnmarshalText([]byte("")))
}
