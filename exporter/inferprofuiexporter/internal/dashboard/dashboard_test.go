// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// flush is one connector flush after the exporter's delta step: delta
// histograms with the connector's TTFT buckets, request counters, kernel
// sums and NVML gauges.
func flush(at time.Time, ttft []float64, failed int, good int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ts := pcommon.NewTimestampFromTime(at)
	bounds := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	h := ms.AppendEmpty()
	h.SetName(names.MetricTimeToFirstToken)
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := hh.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.ExplicitBounds().FromRaw(bounds)
	counts := make([]uint64, len(bounds)+1)
	var sum float64
	for _, v := range ttft {
		i := 0
		for i < len(bounds) && v > bounds[i] {
			i++
		}
		counts[i]++
		sum += v
	}
	dp.BucketCounts().FromRaw(counts)
	dp.SetCount(uint64(len(ttft)))
	dp.SetSum(sum)
	q := ms.AppendEmpty()
	q.SetName(names.MetricQueueDuration)
	qh := q.SetEmptyHistogram()
	qh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	qd := qh.DataPoints().AppendEmpty()
	qd.SetTimestamp(ts)
	qd.SetCount(4)
	qd.SetSum(0.2)
	// Cumulative histograms never reach the dashboard (the delta step
	// converts them); one arriving anyway is left out.
	c := ms.AppendEmpty()
	c.SetName(names.MetricRequestDuration)
	ch := c.SetEmptyHistogram()
	ch.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cd := ch.DataPoints().AppendEmpty()
	cd.SetTimestamp(ts)
	cd.SetCount(1)
	cd.BucketCounts().FromRaw([]uint64{1})
	sumOf := func(name string, v float64, attrs map[string]string) {
		m := ms.AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		s.SetIsMonotonic(true)
		d := s.DataPoints().AppendEmpty()
		d.SetTimestamp(ts)
		d.SetDoubleValue(v)
		for k, v := range attrs {
			d.Attributes().PutStr(k, v)
		}
	}
	sumOf(names.MetricRequests, float64(len(ttft)), nil)
	sumOf(names.MetricRequests, float64(failed), map[string]string{names.AttrErrorType: "_OTHER"})
	sumOf(names.MetricGoodput, float64(good), nil)
	sumOf(names.MetricKernelDuration, 0.3, map[string]string{names.AttrKernelName: "sm90_gemm", names.AttrKernelCategory: "gemm"})
	sumOf(names.MetricKernelDuration, 0.1, map[string]string{names.AttrKernelName: "flash_fwd", names.AttrKernelCategory: "attention"})
	sumOf(names.MetricKernelCount, 12, map[string]string{names.AttrKernelName: "sm90_gemm", names.AttrKernelCategory: "gemm"})

	g := md.ResourceMetrics().AppendEmpty()
	g.Resource().Attributes().PutStr(names.AttrDeviceID, "GPU-1")
	g.Resource().Attributes().PutStr("hw.name", "NVIDIA H200")
	gm := g.ScopeMetrics().AppendEmpty().Metrics()
	u := gm.AppendEmpty()
	u.SetName("hw.gpu.utilization")
	ud := u.SetEmptyGauge().DataPoints().AppendEmpty()
	ud.SetTimestamp(ts)
	ud.SetDoubleValue(0.5)
	ud.Attributes().PutStr("hw.gpu.task", "general")
	return md
}

func TestHistoryBuild(t *testing.T) {
	h := NewHistory()
	ttft1 := []float64{0.03, 0.05, 0.07, 0.09, 0.3}
	h.Add(flush(t0.Add(15*time.Second), ttft1, 1, 3))
	// Two batches of one flush (the batch processor split it) merge.
	h.Add(flush(t0.Add(30*time.Second), []float64{0.03}, 0, 1))
	h.Add(flush(t0.Add(30*time.Second+200*time.Millisecond), []float64{0.05}, 0, 1))

	d := h.Build("0.1.0", t0, t0.Add(time.Minute), nil, 0)
	assert.Equal(t, Targets{}, d.Targets, "no targets until the connector emits them")
	require.Len(t, d.Latency["ttft"], 2)
	p := d.Latency["ttft"][0]
	assert.Equal(t, t0.Add(15*time.Second).UnixMilli(), p.T)
	assert.EqualValues(t, len(ttft1), p.Count)
	// Nearest rank 3 of 5 lies in the (0.06, 0.08] bucket.
	require.NotNil(t, p.P50)
	assert.True(t, *p.P50 > 0.06 && *p.P50 <= 0.08, "p50 %v", *p.P50)
	assert.EqualValues(t, 2, d.Latency["ttft"][1].Count, "one flush split in two batches")
	assert.Empty(t, d.Latency["e2e"], "cumulative points left out")

	require.Len(t, d.Phases, 2)
	require.NotNil(t, d.Phases[0].Queue)
	assert.InDelta(t, 0.05, *d.Phases[0].Queue, 1e-12)

	assert.EqualValues(t, 7, d.Totals.Requests)
	assert.EqualValues(t, 1, d.Totals.Errors)
	assert.EqualValues(t, 5, d.Totals.Good)
	require.NotNil(t, d.Totals.GoodputRatio)
	assert.InDelta(t, 5.0/7, *d.Totals.GoodputRatio, 1e-12)

	assert.InDelta(t, 1.2, d.Kernels.TotalSeconds, 1e-12)
	require.Len(t, d.Kernels.Top, 2)
	assert.Equal(t, "sm90_gemm", d.Kernels.Top[0].Name)
	assert.InDelta(t, 0.9, d.Kernels.Top[0].Seconds, 1e-12)
	assert.EqualValues(t, 36, d.Kernels.Top[0].Count)
	require.Len(t, d.Kernels.Categories, 2)
	assert.InDelta(t, 0.75, d.Kernels.Categories[0].Share, 1e-12)

	require.Len(t, d.GPUs, 1)
	assert.Equal(t, "NVIDIA H200", d.GPUs[0].Name)
	require.Len(t, d.GPUs[0].Utilization, 2)
	assert.InDelta(t, 50, d.GPUs[0].Utilization[0][1], 1e-12)
}

// targetsFlush is the connector's inferprof.server.goodput.target gauge.
func targetsFlush(at time.Time, targets map[string]float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(names.MetricGoodputTarget)
	dps := m.SetEmptyGauge().DataPoints()
	for c, v := range targets {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.Attributes().PutStr(names.AttrGoodputCriterion, c)
		dp.SetDoubleValue(v)
	}
	return md
}

// TestTargetsFromTheConnector: the targets drawn are the latest the
// connector emitted; a target it stops emitting is no longer drawn.
func TestTargetsFromTheConnector(t *testing.T) {
	h := NewHistory()
	h.Add(targetsFlush(t0, map[string]float64{names.GoodputTTFT: 2, names.GoodputTPOT: 0.1, "unknown": 7}))
	assert.Equal(t, Targets{TTFT: 2, TPOT: 0.1}, h.Build("", t0, t0, nil, 0).Targets)
	h.Add(flush(t0.Add(time.Second), []float64{0.1}, 0, 1))
	assert.Equal(t, Targets{TTFT: 2, TPOT: 0.1}, h.Build("", t0, t0, nil, 0).Targets, "a flush without the gauge keeps them")
	h.Add(targetsFlush(t0.Add(2*time.Second), map[string]float64{names.GoodputE2E: 20}))
	assert.Equal(t, Targets{E2E: 20}, h.Build("", t0, t0, nil, 0).Targets)
}

func TestRingKeepsTheLastPoints(t *testing.T) {
	h := NewHistory()
	for i := range maxPoints + 10 {
		h.Add(flush(t0.Add(time.Duration(i)*time.Second), []float64{0.1}, 0, 1))
	}
	d := h.Build("", t0, t0, nil, 0)
	require.Len(t, d.Latency["ttft"], maxPoints)
	assert.Equal(t, t0.Add(10*time.Second).UnixMilli(), d.Latency["ttft"][0].T, "the oldest points dropped")
}

func TestPage(t *testing.T) {
	mux := http.NewServeMux()
	h := NewHistory()
	h.Add(flush(t0, []float64{0.1}, 0, 1))
	Register(mux, Source{Version: "0.1.0", Start: t0, Now: func() time.Time { return t0 }, History: h})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	page := string(body)
	assert.NotContains(t, page, "/*SCRIPT*/")
	assert.NotContains(t, page, "/*STYLE*/")
	assert.Contains(t, page, "function refresh()")
	// Self-contained: nothing referenced from elsewhere.
	assert.Empty(t, regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).FindAllString(page, -1))
	assert.NotContains(t, strings.ToLower(page), "@import")
	assert.NotContains(t, strings.ToLower(page), "@font-face")

	resp, err = http.Get(srv.URL + "/dashboard.json")
	require.NoError(t, err)
	var d Doc
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	resp.Body.Close()
	assert.EqualValues(t, 1, d.Totals.Requests)
	assert.False(t, d.Timeline.Enabled)

	// Read-only: other methods are refused, other paths are not the page.
	resp, err = http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp, err = http.Get(srv.URL + "/nope")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
