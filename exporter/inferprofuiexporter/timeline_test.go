// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadatatest"
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

// TestTracesFeedTheTimeline: without traces mode, a traces pipeline feeds
// the local timeline only; the exporter leaves the spans as they were
// (other exporters share them), counts the bad span, and never serves
// attributes it does not know (the prompt stays out).
func TestTracesFeedTheTimeline(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig().(*Config)
	cfg.Local.NetAddr.Endpoint = "127.0.0.1:0"
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

	registryMu.Lock()
	url := "http://" + registry[cfg].addr.String()
	registryMu.Unlock()
	doc := getTimeline(t, url)
	assert.EqualValues(t, 1, doc["otherData"].(map[string]any)["requests"])
	raw, _ := json.Marshal(doc)
	assert.Contains(t, string(raw), "cmpl-1")
	assert.NotContains(t, string(raw), "SECRET PROMPT")
	metadatatest.AssertEqualGraphsignalTimelineBadSpans(t, tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestTracesModeAlsoFeedsTheTimeline: with traces mode the spans are
// uploaded and kept locally.
func TestTracesModeAlsoFeedsTheTimeline(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.Enabled = true })
	set := metadatatest.NewSettings(h.tel)
	exp, err := NewFactory().CreateTraces(t.Context(), set, h.cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
	require.NoError(t, exp.ConsumeTraces(t.Context(), requestSpans(time.Now())))
	ups := h.srv.Accepted()
	require.Len(t, ups, 1)
	assert.Len(t, ups[0].V0.Spans, 2)
	assert.EqualValues(t, 1, getTimeline(t, h.localURL())["otherData"].(map[string]any)["requests"])
}

// TestTracesWithoutListener: with the local listener off and traces mode
// off, a traces pipeline still starts (the shipped configs have one) and
// drops spans with a warning; with the timeline off too it is refused.
func TestTracesWithoutListener(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig().(*Config)
	cfg.APIKey = "k"
	cfg.Local.NetAddr.Endpoint = ""
	require.NoError(t, cfg.Validate())
	exp, err := NewFactory().CreateTraces(t.Context(), metadatatest.NewSettings(tel), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, exp.ConsumeTraces(t.Context(), requestSpans(time.Now())))
	require.NoError(t, exp.Shutdown(context.Background()))

	cfg.Timeline.Enabled = false
	_, err = NewFactory().CreateTraces(t.Context(), metadatatest.NewSettings(tel), cfg)
	require.ErrorIs(t, err, errTracesOff)
}
