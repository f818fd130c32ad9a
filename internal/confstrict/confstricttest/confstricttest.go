// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package confstricttest checks that a component rejects unknown config keys.
package confstricttest // import "github.com/inferprof/inferprof/internal/confstrict/confstricttest"

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// AssertRejected loads the YAML file at path and decodes each section named
// in want (a component id, e.g. "graphsignal/renamed") into the factory's
// default config, as the collector does; the error must name the unknown
// key want gives for it.
func AssertRejected(t *testing.T, f component.Factory, path string, want map[string]string) {
	t.Helper()
	cm, err := confmaptest.LoadConf(path)
	require.NoError(t, err)
	sections := make([]string, 0, len(want))
	for id := range cm.ToStringMap() {
		sections = append(sections, id)
	}
	require.ElementsMatch(t, sections, slices.Collect(maps.Keys(want)), "every section of %s is a case, and every case a section", path)
	for id, key := range want {
		t.Run(id, func(t *testing.T) {
			var parsed component.ID
			require.NoError(t, parsed.UnmarshalText([]byte(id)))
			require.Equal(t, f.Type(), parsed.Type(), "section %s is not this factory's", id)
			require.True(t, cm.IsSet(id), "%s: no such section in %s", id, path)
			sub, err := cm.Sub(id)
			require.NoError(t, err)
			err = sub.Unmarshal(f.CreateDefaultConfig())
			require.ErrorContains(t, err, "has invalid keys: "+key)
		})
	}
}
