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
	}, cfg)
}

func TestInvalidConfig(t *testing.T) {
	for name, want := range map[string]string{
		"negative_wait":   "sglang_join.wait must not be negative",
		"zero_pending":    "sglang_join.max_pending must be greater than zero",
		"zero_ttl":        "sglang_join.stage_ttl must be greater than zero",
		"empty_operation": "operation_name must not be empty",
		"empty_key":       "model.resource_attributes must not contain an empty key",
		"bare_join_wait":  "sglang_join.wait: 3ns is below the minimum of 1ms; did you forget a unit, e.g. 3s?",
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
	} {
		t.Run(name, func(t *testing.T) {
			sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
			require.NoError(t, err)
			assert.ErrorContains(t, sub.Unmarshal(createDefaultConfig()), want)
		})
	}
}

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
		// Agent runs and cost moved to agent_run (issue #28).
		"agents":         `"agents" is no longer a key of this processor: agent runs and cost are the agent_run processor's job`,
		"prices":         `"prices" is no longer a key of this processor: agent runs and cost are the agent_run processor's job`,
		"gpu_hour_price": `"gpu_hour_price" is no longer a key of this processor: agent runs and cost are the agent_run processor's job`,
		"cost":           `"cost" is no longer a key of this processor: agent runs and cost are the agent_run processor's job`,
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
