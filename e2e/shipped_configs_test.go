// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type shipped struct {
	Receivers  map[string]any `yaml:"receivers"`
	Processors map[string]any `yaml:"processors"`
	Connectors map[string]any `yaml:"connectors"`
	Service    struct {
		Pipelines map[string]struct {
			Receivers  []string `yaml:"receivers"`
			Processors []string `yaml:"processors"`
			Exporters  []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

func loadShipped(t *testing.T, name string) shipped {
	t.Helper()
	b, err := os.ReadFile(shippedConfig(name))
	require.NoError(t, err)
	var s shipped
	require.NoError(t, yaml.Unmarshal(b, &s))
	return s
}

// TestShippedConfigsAgree keeps config/graphsignal.yaml the same as
// config/default.yaml in everything but where data goes: the same receivers,
// processors, connectors and pipeline shapes, with memory_limiter first.
func TestShippedConfigsAgree(t *testing.T) {
	def := loadShipped(t, "default.yaml")
	gs := loadShipped(t, "graphsignal.yaml")
	assert.Equal(t, def.Receivers, gs.Receivers)
	assert.Equal(t, def.Processors, gs.Processors)
	// graphsignal.yaml alone has a file_storage, for the upload queue and
	// the connector's window marker; default.yaml counts no lost window.
	gsIM, ok := gs.Connectors["inference_metrics"].(map[string]any)
	require.True(t, ok)
	assert.Equal(t, "file_storage/graphsignal", gsIM["storage"])
	delete(gsIM, "storage")
	assert.Equal(t, def.Connectors, gs.Connectors)
	require.Equal(t, len(def.Service.Pipelines), len(gs.Service.Pipelines))
	for name, p := range def.Service.Pipelines {
		q, ok := gs.Service.Pipelines[name]
		require.Truef(t, ok, "pipeline %s missing from graphsignal.yaml", name)
		assert.Equalf(t, p.Receivers, q.Receivers, "pipeline %s receivers", name)
		assert.Equalf(t, p.Processors, q.Processors, "pipeline %s processors", name)
		// Pipelines fed by a receiver from outside start with memory_limiter.
		if !slices.Equal(p.Receivers, []string{"forward/traces"}) {
			require.NotEmptyf(t, p.Processors, "pipeline %s has no processors", name)
			assert.Equalf(t, "memory_limiter", p.Processors[0], "pipeline %s", name)
		}
	}
	assert.Contains(t, gs.Service.Pipelines["metrics"].Exporters, "graphsignal")
	assert.Contains(t, def.Service.Pipelines["metrics"].Exporters, "graphsignal")
}

// TestShippedConfigsKeyOnExportedResource: in every shipped config the
// inference_metrics connector keys its series on exactly the resource
// attributes the prometheus exporter keeps as labels. A longer list splits
// series the exporter then merges into one label set, where they overwrite
// each other and counters go backwards; a shorter one merges what the
// exporter tells apart.
func TestShippedConfigsKeyOnExportedResource(t *testing.T) {
	for _, name := range []string{"default.yaml", "graphsignal.yaml", "gateway.yaml"} {
		b, err := os.ReadFile(shippedConfig(name))
		require.NoError(t, err)
		var c struct {
			Connectors struct {
				InferenceMetrics struct {
					Keys []string `yaml:"resource_metrics_key_attributes"`
				} `yaml:"inference_metrics"`
			} `yaml:"connectors"`
			Exporters struct {
				Prometheus struct {
					Labels struct {
						Included []string `yaml:"included"`
					} `yaml:"resource_constant_labels"`
				} `yaml:"prometheus"`
			} `yaml:"exporters"`
		}
		require.NoError(t, yaml.Unmarshal(b, &c), name)
		require.NotEmptyf(t, c.Exporters.Prometheus.Labels.Included, "%s: prometheus resource_constant_labels.included", name)
		assert.Equalf(t, c.Exporters.Prometheus.Labels.Included, c.Connectors.InferenceMetrics.Keys,
			"%s: inference_metrics resource_metrics_key_attributes differ from the prometheus exporter's labels", name)
	}
}
