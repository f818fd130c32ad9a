// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package telemetrytest reads a component's own counters in tests, for the
// places where the generated metadatatest.AssertEqual… cannot go: polling
// with require.Eventually, and a counter that must still be zero (it is not
// exported before its first increment, so AssertEqual finds no metric).
package telemetrytest // import "github.com/inferprof/inferprof/internal/telemetrytest"

import (
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"
)

// Counters reads the int64 counters a component declares in its
// metadata.yaml.
type Counters struct {
	tel   *componenttest.Telemetry
	known map[string]bool
}

// NewCounters reads the telemetry metric names of the metadata.yaml at path
// (the component's, "metadata.yaml" from its own tests); each file is read
// once per test binary.
func NewCounters(t testing.TB, tel *componenttest.Telemetry, path string) *Counters {
	t.Helper()
	if known, ok := declared.Load(path); ok {
		return &Counters{tel: tel, known: known.(map[string]bool)}
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var md struct {
		Telemetry struct {
			Metrics map[string]any `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	require.NoError(t, yaml.Unmarshal(b, &md))
	require.NotEmpty(t, md.Telemetry.Metrics, "%s declares no telemetry metrics", path)
	known := make(map[string]bool, len(md.Telemetry.Metrics))
	for name := range md.Telemetry.Metrics {
		known[name] = true
	}
	declared.Store(path, known)
	return &Counters{tel: tel, known: known}
}

var declared sync.Map // path -> map[string]bool, never changed once stored

// Sum is the sum of the counter's data points, 0 before its first
// increment. name is as metadata.yaml gives it (receiver_cupti_connections);
// a name it does not declare fails the test, so a misspelt one cannot pass
// for a counter that stayed at zero.
func (c *Counters) Sum(t testing.TB, name string) int64 {
	t.Helper()
	require.True(t, c.known[name], "%q is not a telemetry metric in metadata.yaml", name)
	m, err := c.tel.GetMetric("otelcol_" + name)
	if err != nil {
		return 0 // declared, and not incremented yet
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", name, m.Data)
	var n int64
	for _, dp := range sum.DataPoints {
		n += dp.Value
	}
	return n
}
