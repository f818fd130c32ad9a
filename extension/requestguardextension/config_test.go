// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package requestguardextension

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		id      string
		want    *Config
		wantErr string
	}{
		{id: "request_guard", want: &Config{MaxDepth: 128}},
		{id: "request_guard/custom", want: &Config{MaxDepth: 64, AllowedHosts: []string{"inferprof.example", "10.0.0.7"}}},
		{id: "request_guard/bad_depth", wantErr: "max_depth 0: must be positive"},
		{id: "request_guard/bad_host", wantErr: "allowed_hosts"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tc.id)
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = cfg.(*Config).Validate()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg)
		})
	}
}
