// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

func TestUnmarshalDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.New().Unmarshal(&cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
	require.NoError(t, confmap.Validate(cfg))

	def := cfg.(*Config)
	assert.True(t, def.PhaseSpans)
	assert.Equal(t, 3*time.Second, def.SGLangJoin.Wait)
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
		PhaseSpans: false,
		Model: ModelConfig{
			ResourceAttributes: []string{"service.model", "inferprof.model.name"},
			Default:            "Qwen/Qwen3-8B",
		},
		LoRAAttributes: []string{"lora_name"},
		OperationName:  "chat",
		SGLangJoin:     JoinConfig{Wait: 5 * time.Second, StageTTL: 10 * time.Minute, MaxPending: 5000},
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
		"negative_wait":      "sglang_join.wait must not be negative",
		"zero_pending":       "sglang_join.max_pending must be greater than zero",
		"zero_ttl":           "sglang_join.stage_ttl must be greater than zero",
		"empty_operation":    "operation_name must not be empty",
		"empty_key":          "model.resource_attributes must not contain an empty key",
		"no_currency":        `prices["gpt-4.1"].currency is required`,
		"no_input":           `prices["gpt-4.1"].input is required`,
		"negative_price":     `gpu_hour_price["NVIDIA H200"].price must be a finite number`,
		"unknown_gpu":        `cost.gpu "NVIDIA H100" has no entry in gpu_hour_price`,
		"zero_max_hold":      "agents.max_hold must be positive",
		"per_trace_over_max": "agents.max_spans_per_trace must be positive and at most agents.max_spans",
		"wait_over_hold":     "agents.wait and agents.engine_wait must be shorter than agents.max_hold",
		"bare_join_wait":     "sglang_join.wait: 3ns is below the minimum of 1ms; did you forget a unit, e.g. 3s?",
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
	for name, want := range map[string]string{
		"typed_join_wait": `sglang_join.wait: "five seconds" is not a duration; write a number with a unit`,
		"typed_max_hold":  `agents.max_hold: []interface {}{"10m"} is not a duration`,
	} {
		t.Run(name, func(t *testing.T) {
			sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
			require.NoError(t, err)
			assert.ErrorContains(t, sub.Unmarshal(createDefaultConfig()), want)
		})
	}
}

func ptr(f float64) *float64 { return &f }

// TestRemovedKeys: a config written for the processor's old shape fails at
// load, naming the key and the component that does its job now.
func TestRemovedKeys(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for name, want := range map[string]string{
		"privacy":       `"privacy" is no longer a key of this processor: content removal is the privacy processor's job`,
		"engine_steps":  `"engine_steps" is no longer a key of this processor: inter-token latency from engine steps is the step_figures processor's job`,
		"gpu":           `"gpu" is no longer a key of this processor: GPU figures per step and request are the step_figures processor's job`,
		"defer_figures": `"defer_figures" is no longer a key of this processor: a node agent runs the step_figures processor in place of inference`,
	} {
		t.Run(name, func(t *testing.T) {
			sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
			require.NoError(t, err)
			assert.ErrorContains(t, sub.Unmarshal(createDefaultConfig()), want)
		})
	}
}

// TestUnknownKey: a misspelt key is an error that names it.
func TestUnknownKey(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{"phase_span": false})
	cfg := createDefaultConfig()
	err := conf.Unmarshal(cfg)
	require.Error(t, err)
	assert.ErrorContains(t, err, "phase_span")
}
