// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadata"
	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadatatest"
	"github.com/inferprof/inferprof/internal/names"
)

// requestSpans is a request span as the inference processor leaves it,
// and a kernel span with no time range (bad input).
func requestSpans(now time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	sp := spans.AppendEmpty()
	sp.SetName("llm_request")
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{2})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-2 * time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	sp.Attributes().PutStr(names.AttrRequestID, "cmpl-1")
	sp.Attributes().PutDouble(names.AttrE2E, 1)
	sp.Attributes().PutDouble(names.AttrTimeToFirstToken, 0.2)
	sp.Attributes().PutStr("gen_ai.prompt", "SECRET PROMPT")
	bad := spans.AppendEmpty()
	bad.SetName("sm90_gemm")
	bad.Attributes().PutStr(names.AttrKernelName, "sm90_gemm")
	return td
}

func getTimeline(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/timeline?last=60s")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	return doc
}

// addrOf is where cfg's UI listens, once started.
func addrOf(t *testing.T, cfg *Config) string {
	t.Helper()
	s, err := uis.LoadOrStore(cfg, func() (*ui, error) { return nil, errors.New("not created") })
	require.NoError(t, err)
	// A handle of its own, released at once: the exporters' handles keep
	// the instance (sharedcomponent counts its users).
	defer func() { require.NoError(t, s.Shutdown(t.Context())) }()
	require.NotNil(t, s.Unwrap().addr)
	return "http://" + s.Unwrap().addr.String()
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = "127.0.0.1:0"
	return cfg
}

// TestTracesFeedTheTimeline: a traces pipeline feeds the timeline; the
// exporter leaves the spans as they were (other exporters share them),
// counts the bad span, and never serves attributes it does not know (the
// prompt stays out).
func TestTracesFeedTheTimeline(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := testConfig()
	set := metadatatest.NewSettings(tel)
	exp, err := NewFactory().CreateTraces(t.Context(), set, cfg)
	require.NoError(t, err)
	assert.False(t, exp.Capabilities().MutatesData)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	td := requestSpans(time.Now())
	before := ptrace.NewTraces()
	td.CopyTo(before)
	require.NoError(t, exp.ConsumeTraces(t.Context(), td))
	assert.Equal(t, before, td, "the spans are left as they were")

	doc := getTimeline(t, addrOf(t, cfg))
	assert.EqualValues(t, 1, doc["otherData"].(map[string]any)["requests"])
	raw, _ := json.Marshal(doc)
	assert.Contains(t, string(raw), "cmpl-1")
	assert.NotContains(t, string(raw), "SECRET PROMPT")
	metadatatest.AssertEqualInferprofUITimelineBadSpans(t, tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestTimelineOff: with the timeline off a traces pipeline is refused at
// build time, with the reason; the metrics one still serves the dashboard.
func TestTimelineOff(t *testing.T) {
	cfg := testConfig()
	cfg.Timeline.Enabled = false
	require.NoError(t, cfg.Validate())
	set := exportertest.NewNopSettings(metadata.Type)
	_, err := NewFactory().CreateTraces(t.Context(), set, cfg)
	require.ErrorIs(t, err, errTimelineOff)
	exp, err := NewFactory().CreateMetrics(t.Context(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
	resp, err := http.Get(addrOf(t, cfg) + "/timeline?last=60s")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, err = http.Get(addrOf(t, cfg) + "/dashboard.json")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
