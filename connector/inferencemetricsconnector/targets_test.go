// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

// targetPoints reads inferprof.server.goodput.target: criterion -> seconds.
func targetPoints(t *testing.T, md pmetric.Metrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range metricsNamed(md, names.MetricGoodputTarget) {
		require.Equal(t, pmetric.MetricTypeGauge, m.Type())
		assert.Equal(t, "s", m.Unit())
		for _, dp := range m.Gauge().DataPoints().All() {
			c, ok := dp.Attributes().Get(names.AttrGoodputCriterion)
			require.True(t, ok, "a target point without %s", names.AttrGoodputCriterion)
			out[c.Str()] = dp.DoubleValue()
		}
	}
	return out
}

// TestGoodputTargetGauge: the connector emits the targets it judges
// goodput by, the ones set and no other, beside the counts; the dashboard
// reads them from here instead of a second copy in its own config.
func TestGoodputTargetGauge(t *testing.T) {
	tests := []struct {
		name    string
		goodput GoodputConfig
		want    map[string]float64
	}{
		{"defaults", createDefaultConfig().(*Config).Goodput, map[string]float64{names.GoodputTTFT: 2, names.GoodputTPOT: 0.1}},
		{"all three", GoodputConfig{TimeToFirstToken: 500 * time.Millisecond, TimePerOutputToken: 50 * time.Millisecond, E2E: 20 * time.Second},
			map[string]float64{names.GoodputTTFT: 0.5, names.GoodputTPOT: 0.05, names.GoodputE2E: 20}},
		{"none", GoodputConfig{}, map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Goodput = tt.goodput })
			td, spans := batch(vllmResource)
			h.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrE2E: 1.0})
			require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
			md := h.flush(t, time.Second)
			assert.Equal(t, tt.want, targetPoints(t, md))
			assert.Equal(t, map[string]int64{"": 1}, sumPoints(t, md, names.MetricRequests))
		})
	}
}

// TestGoodputTargetGaugeNeedsRequests: a flush with no request to judge
// (only engine steps) carries no targets.
func TestGoodputTargetGaugeNeedsRequests(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	h.addSpan(spans, names.SpanEngineStep, 20*time.Millisecond, map[string]any{
		names.AttrStepPrefillReqs: 1, names.AttrStepDecodeReqs: 7, names.AttrStepScheduledToks: 519,
	})
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	require.NotEmpty(t, metricsNamed(md, names.MetricStepDuration), "the flush carries the step")
	assert.Empty(t, targetPoints(t, md))
}
