// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

func TestDefaultConfigRoundTrips(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, confmap.Validate(cfg))
	got := createDefaultConfig().(*Config)
	require.NoError(t, confmap.New().Unmarshal(got))
	assert.Equal(t, cfg, got)
	assert.Equal(t, 10*time.Second, cfg.ControllerConfig.CollectionInterval)
	assert.Equal(t, "/proc", cfg.Processes.ProcRoot)
	assert.True(t, cfg.Events.Enabled)
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	custom := createDefaultConfig().(*Config)
	custom.ControllerConfig.CollectionInterval = 5 * time.Second
	custom.Devices = "0,GPU-8932f937"
	custom.InitRetryInterval = 30 * time.Second
	custom.Events = EventsConfig{Enabled: true, MaxPending: 500}
	custom.Processes = ProcessesConfig{ProcRoot: "/host/proc"}
	// Unmarshal, not assign, so the builder config records that the user set it.
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"metrics": map[string]any{"nvidia.gpu.fan.speed": map[string]any{"enabled": false}},
	}).Unmarshal(&custom.MetricsBuilderConfig))

	tests := []struct {
		id   component.ID
		want *Config
	}{
		{component.NewID(metadata.Type), createDefaultConfig().(*Config)},
		{component.NewIDWithName(metadata.Type, "custom"), custom},
	}
	for _, tc := range tests {
		t.Run(tc.id.String(), func(t *testing.T) {
			sub, err := cm.Sub(tc.id.String())
			require.NoError(t, err)
			cfg := createDefaultConfig().(*Config)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tc.want, cfg)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"indexes and uuids", func(c *Config) { c.Devices = " 1, GPU-abc ,MIG-def" }, ""},
		{"negative index", func(c *Config) { c.Devices = "0,-1" }, `devices: entry "-1"`},
		{"garbage", func(c *Config) { c.Devices = "first" }, `devices: entry "first"`},
		{"empty entry", func(c *Config) { c.Devices = "0,,1" }, "devices: empty entry"},
		{"bare uuid prefix", func(c *Config) { c.Devices = "GPU-" }, "devices: UUID"},
		{"negative retry", func(c *Config) { c.InitRetryInterval = -time.Second }, "init_retry_interval"},
		{"zero pending", func(c *Config) { c.Events.MaxPending = 0 }, "events::max_pending"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tc.mutate(cfg)
			err := confmap.Validate(cfg)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestParseDeviceFilter(t *testing.T) {
	t.Parallel()
	got, err := parseDeviceFilter("2, GPU-12ab")
	require.NoError(t, err)
	assert.Equal(t, []deviceSelector{{index: 2}, {index: -1, uuid: "GPU-12ab"}}, got)
	got, err = parseDeviceFilter("  ")
	require.NoError(t, err)
	assert.Nil(t, got)
}
