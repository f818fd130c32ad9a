// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstoreextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/inferprof/inferprof/internal/gpuwindow"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	custom := createDefaultConfig().(*Config)
	custom.Quiet, custom.MaxSteps, custom.TopKernels = 20*time.Millisecond, 1000, 5
	for _, tc := range []struct {
		id      string
		want    *Config
		wantErr string
	}{
		{id: "step_store", want: createDefaultConfig().(*Config)},
		{id: "step_store/custom", want: custom},
		{id: "step_store/bad_bound", wantErr: "max_steps 0: must be positive"},
		{id: "step_store/bad_quiet", wantErr: "quiet must be positive"},
		// A misspelt key is an error that names it, not a silent default.
		{id: "step_store/typo", wantErr: "max_step"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tc.id)
			require.NoError(t, err)
			if err = sub.Unmarshal(cfg); err == nil {
				err = cfg.(*Config).Validate()
			}
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg)
		})
	}
}

// The defaults are the window's own, so a config without the block keeps
// the bounds the window was tuned with.
func TestDefaultsAreTheWindows(t *testing.T) {
	require.Equal(t, gpuwindow.NewDefaultConfig(), createDefaultConfig().(*Config).window())
}
