// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/processor/stepfiguresprocessor/internal/metadata"
)

func TestUnmarshalDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, confmap.New().Unmarshal(&cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
	require.NoError(t, confmap.Validate(cfg))
	def := cfg.(*Config)
	assert.True(t, def.EngineSteps.Enabled)
	assert.True(t, def.GPU.Enabled)
	assert.Equal(t, 5*time.Second, def.GPU.Wait)
}

func sub(t *testing.T, name string) *confmap.Conf {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	s, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
	require.NoError(t, err)
	return s
}

func load(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if err := sub(t, name).Unmarshal(cfg); err != nil {
		return cfg, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestUnmarshalConfig(t *testing.T) {
	cfg, err := load(t, "")
	require.NoError(t, err)
	assert.Equal(t, &Config{
		EngineSteps: StepsConfig{Enabled: true, MaxAge: 10 * time.Minute, MaxRecords: 500_000, MaxInstances: 16, StallFactor: 4, MaxITLGaps: 128},
		GPU:         GPUConfig{Enabled: true, Wait: 2 * time.Second, MaxHeld: 20_000},
	}, cfg)
}

func TestInvalidConfig(t *testing.T) {
	for name, want := range map[string]string{
		"zero_max_age":     "engine_steps.max_age must be positive",
		"low_stall_factor": "engine_steps.stall_factor must be above 1",
		"negative_gaps":    "engine_steps.max_itl_gaps must not be negative",
		"zero_gpu_wait":    "gpu.wait must be positive",
		"zero_gpu_held":    "gpu.max_held must be positive",
		"bare_gpu_wait":    "gpu.wait: 15ns is below the minimum of 1ms; did you forget a unit, e.g. 15s?",
		"short_max_age":    "engine_steps.max_age: 100ms is below the minimum of 1s",
		"typed_gpu_wait":   `gpu.wait: "five seconds" is not a duration; write a number with a unit`,
		"typed_max_age":    `engine_steps.max_age: []interface {}{"10m"} is not a duration`,
		"typo":             "engine_step",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := load(t, name)
			require.Error(t, err)
			assert.ErrorContains(t, err, want)
		})
	}
}
