// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestDefaultConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:18259", cfg.ServerConfig.NetAddr.Endpoint, "loopback by default")
	assert.True(t, cfg.Timeline.Enabled)
	assert.True(t, cfg.Dashboard.Enabled)
	assert.EqualValues(t, 64, cfg.Timeline.MemoryLimitMiB)
	assert.Equal(t, 15*time.Minute, cfg.Timeline.MaxAge)
	assert.EqualValues(t, 32, cfg.Timeline.MaxResponseMiB)
}

func TestFullConfig(t *testing.T) {
	cfg, err := loadConfig(t, "full")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:28259", cfg.ServerConfig.NetAddr.Endpoint)
	assert.Equal(t, 10*time.Second, cfg.ServerConfig.ReadHeaderTimeout)
	assert.Equal(t, []string{"profiler.internal"}, cfg.AllowedHosts)
	assert.EqualValues(t, 256, cfg.Timeline.MemoryLimitMiB)
	assert.Equal(t, 30*time.Minute, cfg.Timeline.MaxAge)
	assert.EqualValues(t, 8, cfg.Timeline.MaxResponseMiB)
	assert.False(t, cfg.Dashboard.Enabled)
}

// TestConfigErrors: each bad configuration fails with an error naming
// what is wrong. An unknown key is one, even next to confighttp's squashed
// server settings, whose own decoder ignores unknown keys.
func TestConfigErrors(t *testing.T) {
	for name, want := range map[string]string{
		"typo":         "has invalid keys: endpont",
		"nested_typo":  "'timeline' has invalid keys: max_agee",
		"old_goodput":  "dashboard.goodput: the goodput targets are the inference_metrics connector's",
		"bad_duration": "timeline.max_age: 15ns is below the minimum of 1s; did you forget a unit",
		"bad_timeline": "timeline.memory_limit_mib: 0: must be positive",
		"no_endpoint":  "endpoint: must be set",
		"bad_endpoint": "endpoint: address 18259: missing port in address",
		"nothing":      "would serve nothing",
		"bad_host":     "allowed_hosts:",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}
