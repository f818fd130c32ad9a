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

// Requests' GPU time adds up per model and kernel category; each request's
// CPU overhead over its duration is one histogram sample.
func TestGPUTimeAndCPUOverheadShare(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	for i, g := range []struct {
		model    string
		cats     []any
		times    []any
		overhead float64
		e2e      float64
	}{
		{"m1", []any{"attention", "gemm"}, []any{0.3, 0.1}, 0.25, 1},
		{"m1", []any{"gemm"}, []any{0.2}, 0.1, 2},
		{"m2", []any{"moe"}, []any{0.5}, 0, 1},
	} {
		a := canonical(g.model, 0.1, g.e2e, 0, 0.1, g.e2e-0.2, 10, 5)
		a[names.AttrGPUCategories] = g.cats
		a[names.AttrGPUCategoryTimes] = g.times
		a[names.AttrCPUOverhead] = g.overhead
		a["gen_ai.request.id"] = string(rune('a' + i))
		h.addSpan(spans, "llm_request", time.Duration(g.e2e*float64(time.Second)), a)
	}
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)

	got := map[string]float64{}
	for _, m := range metricsNamed(md, names.MetricGPUTime) {
		require.Equal(t, pmetric.MetricTypeSum, m.Type())
		assert.True(t, m.Sum().IsMonotonic())
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			model, _ := dp.Attributes().Get(names.AttrRequestModel)
			cat, _ := dp.Attributes().Get(names.AttrKernelCategory)
			got[model.Str()+"/"+cat.Str()] = dp.DoubleValue()
		}
	}
	want := map[string]float64{"m1/attention": 0.3, "m1/gemm": 0.3, "m2/moe": 0.5}
	require.Len(t, got, len(want))
	for k, v := range want {
		assert.InDelta(t, v, got[k], 1e-12, k)
	}

	shares := histPoints(t, md, names.MetricCPUOverheadShare)
	var m1 pmetric.HistogramDataPoint
	for _, dp := range shares {
		if dp.Count() == 2 {
			m1 = dp
		}
	}
	require.NotEqual(t, pmetric.HistogramDataPoint{}, m1, "m1's two requests in one series: %v", shares)
	assert.InDelta(t, 0.25+0.05, m1.Sum(), 1e-12)
}

// GPU attributes of the wrong shape are counted, not trusted.
func TestBadGPUAttributes(t *testing.T) {
	h := newHarness(t, nil)
	td, spans := batch(vllmResource)
	a := canonical("m", 0.1, 1, 0, 0.1, 0.8, 10, 5)
	a[names.AttrGPUCategories] = []any{"attention", "gemm"}
	a[names.AttrGPUCategoryTimes] = []any{0.3}
	a[names.AttrCPUOverhead] = "lots"
	h.addSpan(spans, "llm_request", time.Second, a)
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	assert.Empty(t, metricsNamed(md, names.MetricGPUTime))
	assert.Empty(t, metricsNamed(md, names.MetricCPUOverheadShare))
	assert.Len(t, metricsNamed(md, names.MetricRequestDuration), 1, "the request still counts")
}
