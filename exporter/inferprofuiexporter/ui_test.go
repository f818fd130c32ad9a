// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadata"
	"github.com/inferprof/inferprof/internal/names"
)

// connectorFlush is what the inference_metrics connector emits by
// default: cumulative counters and its goodput target gauge.
func connectorFlush(start, at time.Time, requests, good int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	for name, v := range map[string]int64{names.MetricRequests: requests, names.MetricGoodput: good} {
		m := ms.AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetIntValue(v)
	}
	m := ms.AppendEmpty()
	m.SetName(names.MetricGoodputTarget)
	dps := m.SetEmptyGauge().DataPoints()
	for c, v := range map[string]float64{names.GoodputTTFT: 0.5, names.GoodputE2E: 20} {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.Attributes().PutStr(names.AttrGoodputCriterion, c)
		dp.SetDoubleValue(v)
	}
	return md
}

type dashboardDoc struct {
	Targets struct{ TTFT, TPOT, E2E float64 } `json:"targets"`
	Totals  struct {
		Requests, Good int64
	} `json:"totals"`
}

func getDashboard(t *testing.T, base string) dashboardDoc {
	t.Helper()
	resp, err := http.Get(base + "/dashboard.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var d dashboardDoc
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	return d
}

// TestMetricsFeedTheDashboard: cumulative counters become per-flush
// deltas (a total counted twice would double), the targets drawn are the
// connector's, and the exporter leaves the metrics as they were.
func TestMetricsFeedTheDashboard(t *testing.T) {
	cfg := testConfig()
	exp, err := NewFactory().CreateMetrics(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	assert.False(t, exp.Capabilities().MutatesData)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	// Series that began after the exporter did: their first point counts
	// whole (an older one's would be a baseline, internal/delta).
	start := time.Now()
	first := connectorFlush(start, start.Add(15*time.Second), 4, 3)
	before := pmetric.NewMetrics()
	first.CopyTo(before)
	require.NoError(t, exp.ConsumeMetrics(t.Context(), first))
	assert.Equal(t, before, first, "the metrics are left as they were")
	require.NoError(t, exp.ConsumeMetrics(t.Context(), connectorFlush(start, start.Add(30*time.Second), 10, 7)))

	d := getDashboard(t, addrOf(t, cfg))
	assert.EqualValues(t, 10, d.Totals.Requests, "cumulative totals read as deltas")
	assert.EqualValues(t, 7, d.Totals.Good)
	assert.InDelta(t, 0.5, d.Targets.TTFT, 1e-12)
	assert.Zero(t, d.Targets.TPOT)
	assert.InDelta(t, 20, d.Targets.E2E, 1e-12)
}

// TestOneListenerPerComponent: the traces and metrics exporters of one
// configured component share one listener and one store; a second
// component (another *Config) gets its own, and a shut down one is gone.
func TestOneListenerPerComponent(t *testing.T) {
	set := exportertest.NewNopSettings(metadata.Type)
	a, b := testConfig(), testConfig()
	ta, err := NewFactory().CreateTraces(t.Context(), set, a)
	require.NoError(t, err)
	ma, err := NewFactory().CreateMetrics(t.Context(), set, a)
	require.NoError(t, err)
	mb, err := NewFactory().CreateMetrics(t.Context(), set, b)
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, ta.Start(t.Context(), host))
	require.NoError(t, ma.Start(t.Context(), host), "the second signal does not bind again")
	require.NoError(t, mb.Start(t.Context(), host))
	assert.NotEqual(t, addrOf(t, a), addrOf(t, b))

	start := time.Now()
	require.NoError(t, ma.ConsumeMetrics(t.Context(), connectorFlush(start, start.Add(time.Second), 3, 1)))
	require.NoError(t, ta.ConsumeTraces(t.Context(), requestSpans(time.Now())))
	base := addrOf(t, a)
	assert.EqualValues(t, 3, getDashboard(t, base).Totals.Requests)
	assert.EqualValues(t, 1, getTimeline(t, base)["otherData"].(map[string]any)["requests"], "both signals meet in one UI")
	assert.Zero(t, getDashboard(t, addrOf(t, b)).Totals.Requests, "the other component's store is its own")

	n := uis.Len()
	for _, c := range []interface{ Shutdown(context.Context) error }{ta, ma, mb} {
		require.NoError(t, c.Shutdown(context.Background()))
	}
	assert.Equal(t, n-2, uis.Len(), "both shut down and forgotten")
	_, err = http.Get(base + "/dashboard.json")
	assert.Error(t, err, "the listener is closed")
}

// TestRoutes: no /health (health_check serves it); a Host that is not
// loopback nor allowed is refused, as a DNS rebinding page would be.
func TestRoutes(t *testing.T) {
	cfg := testConfig()
	exp, err := NewFactory().CreateMetrics(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
	base := addrOf(t, cfg)
	for path, want := range map[string]int{"/": http.StatusOK, "/dashboard.json": http.StatusOK, "/timeline?last=1m": http.StatusOK,
		"/health": http.StatusNotFound, "/signals": http.StatusNotFound} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/dashboard.json", http.NoBody)
	require.NoError(t, err)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
}
