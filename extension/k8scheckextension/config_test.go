// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package k8scheckextension

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for id, want := range map[string]*Config{
		"k8s_check":     {Passthrough: true},
		"k8s_check/api": {Passthrough: false, NodeName: "gpu-node-3"},
	} {
		t.Run(id, func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(id)
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			require.Equal(t, want, cfg)
		})
	}
}

// TestUnknownKeyIsAnError: a misspelt key names itself instead of being
// ignored (and the check silently describing the wrong setting).
func TestUnknownKeyIsAnError(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "typo.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("k8s_check")
	require.NoError(t, err)
	require.ErrorContains(t, sub.Unmarshal(createDefaultConfig()), "passthru")
}
