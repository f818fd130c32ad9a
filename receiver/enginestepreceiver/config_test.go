// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id   component.ID
		want *Config
	}{
		{component.NewID(metadata.Type), createDefaultConfig().(*Config)},
		{component.NewIDWithName(metadata.Type, "custom"), &Config{Endpoint: "/run/inferprof/steps.sock", ReadBufferSize: 1 << 20, PollInterval: 10 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub("receivers::" + tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, DefaultEndpoint, cfg.Endpoint)
	assert.Equal(t, 4<<20, cfg.ReadBufferSize)
	assert.Equal(t, 2*time.Millisecond, cfg.PollInterval)
	require.NoError(t, cfg.Validate())
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty endpoint", Config{}, "endpoint: must be set"},
		{"relative endpoint", Config{Endpoint: "steps.sock"}, "must be an absolute socket path"},
		{"long endpoint", Config{Endpoint: "/" + strings.Repeat("x", 120)}, "Unix socket path limit"},
		{"negative buffer", Config{Endpoint: "/tmp/s.sock", ReadBufferSize: -1, PollInterval: time.Millisecond}, "read_buffer_size -1"},
		{"no poll interval", Config{Endpoint: "/tmp/s.sock"}, "poll_interval 0s: must be between 100µs and 1s"},
		{"poll interval too long", Config{Endpoint: "/tmp/s.sock", PollInterval: time.Minute}, "poll_interval 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorContains(t, tt.cfg.Validate(), tt.want)
		})
	}
}
