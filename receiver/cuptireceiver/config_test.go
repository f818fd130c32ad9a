// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	full := createDefaultConfig().(*Config)
	full.Endpoint = "/run/inferprof/cupti.sock"
	full.Kineto.Directory = "/var/log/vllm-profiles"
	full.CollectionInterval = 5 * time.Second
	full.TopKernels = 50
	full.MaxConnections = 64
	full.Spans = SpansConfig{Enabled: true, SamplingRatio: 0.01, MaxPerInterval: 500}
	full.KernelCategories = []CategoryRule{{Category: "attention_decode", Pattern: "my_decode_kernel"}}

	tests := []struct {
		id      component.ID
		want    *Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig().(*Config)},
		{id: component.NewIDWithName(metadata.Type, "full"), want: full},
		{id: component.NewIDWithName(metadata.Type, "bad_interval"), wantErr: "collection_interval 0s: must be positive"},
		{id: component.NewIDWithName(metadata.Type, "bad_rule"), wantErr: "kernel_categories: kernel category rule 0 (gemm)"},
		{id: component.NewIDWithName(metadata.Type, "nothing"), wantErr: "endpoint and kineto.directory are both empty"},
		{id: component.NewIDWithName(metadata.Type, "relative"), wantErr: `endpoint "cupti.sock": must be an absolute socket path`},
		{id: component.NewIDWithName(metadata.Type, "bad_top"), wantErr: "top_kernels -1"},
		{id: component.NewIDWithName(metadata.Type, "bad_spans"), wantErr: "spans.max_per_interval 0"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			t.Parallel()
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = cfg.(*Config).Validate()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			got := cfg.(*Config)
			if tt.want == full {
				// The generated config records that the user set the flag.
				assert.False(t, got.Metrics.InferprofGpuSyncDuration.Enabled)
				assert.True(t, got.Metrics.InferprofGpuKernelDuration.Enabled)
				full.MetricsBuilderConfig = got.MetricsBuilderConfig
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "/tmp/inferprof/cupti.sock", cfg.Endpoint)
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Equal(t, 30, cfg.TopKernels)
}
