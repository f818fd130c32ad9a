// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBareNumberDurations: a bare 15 decodes as 15ns; Validate refuses it
// and says to add a unit.
func TestBareNumberDurations(t *testing.T) {
	for key, set := range map[string]func(*Config){
		"collection_interval": func(c *Config) { c.CollectionInterval = 15 },
	} {
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, cfg.Validate())
		set(cfg)
		require.ErrorContains(t, cfg.Validate(), key+": 15ns is below the minimum of ", key)
		require.ErrorContains(t, cfg.Validate(), "did you forget a unit, e.g. 15s?", key)
	}
}
