// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

func TestUnmarshalDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.New().Unmarshal(&cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
	require.NoError(t, confmap.Validate(cfg))

	def := cfg.(*Config)
	assert.True(t, def.Agents.Enabled)
	assert.Equal(t, 6*time.Second, def.Agents.Wait)
	assert.Empty(t, def.Prices, "no price is assumed")
}

func load(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

func TestUnmarshalConfig(t *testing.T) {
	cfg, err := load(t, "")
	require.NoError(t, err)
	assert.Equal(t, &Config{
		Agents: AgentsConfig{
			Enabled: true, Wait: 8 * time.Second, MaxHold: 2 * time.Minute, EngineWait: 6 * time.Second,
			MaxSpans: 50000, MaxSpansPerTrace: 2000, MaxConversations: 1000, ConversationIdle: 30 * time.Minute,
		},
		Prices: map[string]PriceConfig{
			"gpt-4.1":         {Input: ptr(2.0), CachedInput: ptr(0.5), Output: ptr(8.0), Currency: "USD"},
			"claude-sonnet-4": {Input: ptr(3.0), Output: ptr(15.0), Currency: "USD"},
		},
		GPUHourPrice: map[string]GPUPriceConfig{"NVIDIA H200": {Price: ptr(3.5), Currency: "USD"}},
		Cost:         CostConfig{GPU: "NVIDIA H200", GPUCount: 2, ShareWindow: 30 * time.Second, MaxInstances: 64},
	}, cfg)
}

func TestInvalidConfig(t *testing.T) {
	for name, want := range map[string]string{
		"no_currency":        `prices["gpt-4.1"].currency is required`,
		"no_input":           `prices["gpt-4.1"].input is required`,
		"negative_price":     `gpu_hour_price["NVIDIA H200"].price must be a finite number`,
		"unknown_gpu":        `cost.gpu "NVIDIA H100" has no entry in gpu_hour_price`,
		"zero_max_hold":      "agents.max_hold must be positive",
		"per_trace_over_max": "agents.max_spans_per_trace must be positive and at most agents.max_spans",
		"wait_over_hold":     "agents.wait and agents.engine_wait must be shorter than agents.max_hold",
		"bare_agents_wait":   "agents.wait: 8ns is below the minimum of 1ms; did you forget a unit, e.g. 8s?",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := load(t, name)
			require.Error(t, err)
			assert.ErrorContains(t, err, want)
		})
	}
}

// TestDurationDecodeErrorNamesValue: a value that does not decode as a
// duration is named, with its key, in the collector's error.
func TestDurationDecodeErrorNamesValue(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), "typed_max_hold").String())
	require.NoError(t, err)
	assert.ErrorContains(t, sub.Unmarshal(createDefaultConfig()), `agents.max_hold: []interface {}{"10m"} is not a duration`)
}

func ptr(f float64) *float64 { return &f }
