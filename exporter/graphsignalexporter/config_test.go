// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, "https://api.graphsignal.com", cfg.ClientConfig.Endpoint)
	assert.Equal(t, "127.0.0.1:18260", cfg.Local.NetAddr.Endpoint, "18259 is inferprof_ui's")
	assert.Empty(t, cfg.APIKey)
	assert.False(t, cfg.Traces.Enabled)
	assert.Equal(t, encode.NamesGraphsignal, cfg.Names)
	assert.Equal(t, 10*time.Second, cfg.ClientConfig.Timeout)
	assert.Equal(t, configcompression.TypeGzip, cfg.ClientConfig.Compression)
	require.True(t, cfg.QueueConfig.HasValue())
	require.True(t, cfg.QueueConfig.Get().Batch.HasValue())
	assert.Equal(t, time.Second, cfg.QueueConfig.Get().Batch.Get().FlushTimeout)
	assert.Equal(t, int64(10000), cfg.QueueConfig.Get().Batch.Get().MaxSize)
	assert.True(t, cfg.RetryConfig.Enabled)
	require.NoError(t, confmap.Validate(cfg), "the default is valid: local mode")

	// An empty section round-trips to the default.
	got := createDefaultConfig().(*Config)
	require.NoError(t, confmap.New().Unmarshal(got))
	assert.Equal(t, cfg, got)
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, createDefaultConfig(), cfg)

	cfg, err = loadConfig(t, "full")
	require.NoError(t, err)
	want := createDefaultConfig().(*Config)
	want.APIKey = "gs-secret"
	want.ClientConfig.Endpoint = "https://graphsignal.example.com/"
	want.ClientConfig.ProxyURL = "http://proxy.example.com:3128"
	want.ClientConfig.TLS.CAFile = "/etc/ssl/graphsignal-ca.pem"
	want.ClientConfig.Headers = configopaque.MapList{{Name: "X-Team", Value: "ml"}}
	want.ClientConfig.Timeout = 3 * time.Second
	want.Tags = map[string]string{"deployment": "prod"}
	want.Names = encode.NamesSource
	want.Local.NetAddr.Endpoint = "127.0.0.1:28259"
	want.Traces.Enabled = true
	want.RetryConfig.InitialInterval = time.Second
	q := want.QueueConfig.Get()
	id := component.MustNewID("file_storage")
	q.StorageID = &id
	q.QueueSize = 50
	assert.Equal(t, want, cfg)
	// The key stays out of anything printed.
	assert.NotContains(t, cfg.APIKey.String(), "gs-secret")
}

func TestInvalidConfig(t *testing.T) {
	for name, msg := range map[string]string{
		"nothing_to_do":      "local.endpoint: empty with no api_key",
		"traces_without_key": "traces.enabled: needs api_key",
		"bad_endpoint":       "endpoint: \"api.graphsignal.com\" is not an http(s) URL",
		"bad_local":          "local.endpoint:",
		"no_gzip":            "compression: \"zstd\": Graphsignal's ingest reads gzip bodies only",
		"old_timeline":       "timeline: the dashboard and the timeline moved to the inferprof_ui exporter",
		"old_dashboard":      "dashboard: the dashboard and the timeline moved to the inferprof_ui exporter",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.Error(t, err)
			assert.Contains(t, err.Error(), msg)
		})
	}
	// A bad names value fails when the config is loaded.
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("graphsignal/bad_names")
	require.NoError(t, err)
	err = sub.Unmarshal(createDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `names: "otel" is not graphsignal or source`)
}

func TestEndpointTrailingSlash(t *testing.T) {
	assert.Equal(t, "https://x", trimSlash("https://x//"))
}
