// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"context"
	"encoding/json"
	"errors"
	"go.uber.org/zap/zapcore"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadatatest"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/privacy"
)

const prompt = "SECRET PROMPT: tell me about the moon"

type harness struct {
	t       *testing.T
	cfg     *Config
	tel     *componenttest.Telemetry
	logs    *observer.ObservedLogs
	metrics exporter.Metrics
	logsExp exporter.Logs
	srv     *graphsignaltest.Server
}

// syncConfig sends each consume straight to the server (no queue), so a
// test sees one upload per call.
func syncConfig(url string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKey = "test-key"
	cfg.ClientConfig.Endpoint = url
	cfg.Local.NetAddr.Endpoint = "127.0.0.1:0"
	// These tests check the mapping itself under inferprof's own names;
	// names_test.go checks Graphsignal's.
	cfg.Names = encode.NamesSource
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	cfg.Tags = map[string]string{"deployment": "test"}
	return cfg
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, srv: graphsignaltest.NewServer(t), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	h.cfg = syncConfig(h.srv.URL)
	if mod != nil {
		mod(h.cfg)
	}
	require.NoError(t, h.cfg.Validate())
	set := metadatatest.NewSettings(h.tel)
	core, logs := observer.New(zap.InfoLevel)
	h.logs = logs
	set.Logger = zap.New(core)
	set.BuildInfo = component.BuildInfo{Version: "test"}
	f := NewFactory()
	var err error
	h.metrics, err = f.CreateMetrics(t.Context(), set, h.cfg)
	require.NoError(t, err)
	h.logsExp, err = f.CreateLogs(t.Context(), set, h.cfg)
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, h.metrics.Start(t.Context(), host))
	require.NoError(t, h.logsExp.Start(t.Context(), host))
	t.Cleanup(func() {
		require.NoError(t, h.metrics.Shutdown(context.Background()))
		require.NoError(t, h.logsExp.Shutdown(context.Background()))
	})
	return h
}

func (h *harness) localURL() string {
	s, err := instances.LoadOrStore(h.cfg, func() (*shared, error) { return nil, errors.New("not created") })
	require.NoError(h.t, err)
	// Released at once: the exporters' handles keep the instance.
	defer func() { require.NoError(h.t, s.Shutdown(context.Background())) }()
	return "http://" + s.Unwrap().addr.String()
}

func tags(ts []*signalsv1.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range ts {
		m[t.Key] = t.Value
	}
	return m
}

func findMetric(req *signalsv1.UploadRequest, name string) *signalsv1.Metric {
	for _, m := range req.GetMetrics() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

type cumulative struct {
	start           time.Time
	ts              time.Time
	counter         int64
	histCounts      []uint64
	histSum         float64
	histMin, hisMax float64
	gauge           float64
	kernelNs        map[string]int64
	kernelCount     map[string]int64
}

// build makes OTLP metrics as a receiver would: cumulative counters and
// histograms, a gauge, and the cupti receiver's kernel time table.
func (c cumulative) build() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(names.ResourceHostName, "gpu-node-1")
	rm.Resource().Attributes().PutInt(names.ResourceProcessPID, 4242)
	rm.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	rm.Resource().Attributes().PutStr("process.command_line", "vllm serve --prompt '"+prompt+"'")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	start, ts := pcommon.NewTimestampFromTime(c.start), pcommon.NewTimestampFromTime(c.ts)

	g := ms.AppendEmpty()
	g.SetName("hw.gpu.utilization")
	gdp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gdp.SetTimestamp(ts)
	gdp.SetDoubleValue(c.gauge)
	gdp.Attributes().PutStr(names.AttrDeviceID, "0")
	gdp.Attributes().PutStr("gen_ai.prompt", prompt)

	s := ms.AppendEmpty()
	s.SetName("gen_ai.client.token.usage.total")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sdp := sum.DataPoints().AppendEmpty()
	sdp.SetStartTimestamp(start)
	sdp.SetTimestamp(ts)
	sdp.SetIntValue(c.counter)

	hm := ms.AppendEmpty()
	hm.SetName("gen_ai.server.time_to_first_token")
	hist := hm.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hdp := hist.DataPoints().AppendEmpty()
	hdp.SetStartTimestamp(start)
	hdp.SetTimestamp(ts)
	hdp.ExplicitBounds().FromRaw([]float64{0.1, 0.5, 1})
	hdp.BucketCounts().FromRaw(c.histCounts)
	var n uint64
	for _, v := range c.histCounts {
		n += v
	}
	hdp.SetCount(n)
	hdp.SetSum(c.histSum)
	hdp.SetMin(c.histMin)
	hdp.SetMax(c.hisMax)

	for _, spec := range []struct {
		name, unit string
		vals       map[string]int64
	}{{names.MetricKernelDuration, "ns", c.kernelNs}, {names.MetricKernelCount, "{kernel}", c.kernelCount}} {
		km := ms.AppendEmpty()
		km.SetName(spec.name)
		km.SetUnit(spec.unit)
		ks := km.SetEmptySum()
		ks.SetIsMonotonic(true)
		ks.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		keys := make([]string, 0, len(spec.vals))
		for k := range spec.vals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			dp := ks.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(spec.vals[k])
			dp.Attributes().PutStr(names.AttrKernelName, k)
			dp.Attributes().PutStr(names.AttrKernelCategory, "gemm")
			dp.Attributes().PutStr(names.AttrDeviceID, "0")
		}
	}
	return md
}

func TestUploadMetrics(t *testing.T) {
	t.Setenv("GRAPHSIGNAL_TAG_REGION", "eu-west")
	h := newHarness(t, nil)
	start := time.Now()
	first := cumulative{
		start: start, ts: start.Add(time.Second), counter: 10,
		histCounts: []uint64{1, 2, 0, 0}, histSum: 0.9, histMin: 0.05, hisMax: 0.4, gauge: 55,
		kernelNs:    map[string]int64{"sm90_xmma_gemm": 3000, "flash_fwd_kernel": 1000},
		kernelCount: map[string]int64{"sm90_xmma_gemm": 3, "flash_fwd_kernel": 1},
	}
	second := first
	second.ts = start.Add(2 * time.Second)
	second.counter = 25
	second.histCounts = []uint64{1, 5, 0, 2}
	second.histSum = 4.5
	second.hisMax = 1.7
	second.gauge = 60
	second.kernelNs = map[string]int64{"sm90_xmma_gemm": 5000, "flash_fwd_kernel": 1000}
	second.kernelCount = map[string]int64{"sm90_xmma_gemm": 5, "flash_fwd_kernel": 1}

	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), first.build()))
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), second.build()))
	ups := h.srv.Accepted()
	require.Len(t, ups, 2)
	require.Empty(t, h.srv.Malformed())
	assert.Equal(t, "test-key", ups[0].APIKey)
	assert.Equal(t, "/api/v1/ingest", ups[0].Path)
	u1, u2 := ups[0].V1, ups[1].V1
	assert.InDelta(t, time.Now().UnixNano(), u2.UploadTs, float64(time.Minute))

	// Tags: config, environment, instance.id, resource and datapoint.
	g := findMetric(u1, "hw.gpu.utilization")
	require.NotNil(t, g)
	assert.Equal(t, signalsv1.Metric_GAUGE_METRIC, g.Type)
	tg := tags(g.Tags)
	assert.Equal(t, "test", tg["deployment"])
	assert.Equal(t, "eu-west", tg["region"])
	assert.Len(t, tg["instance.id"], 12)
	assert.Equal(t, "gpu-node-1", tg["host.name"])
	assert.Equal(t, "4242", tg["process.pid"])
	assert.Equal(t, "0", tg["hw.id"])
	assert.NotContains(t, tg, "gen_ai.prompt")
	assert.NotContains(t, tg, "process.command_line")
	assert.InDelta(t, 55.0, g.Datapoints[0].GetGauge(), 0)
	assert.Equal(t, first.ts.UnixNano(), g.Datapoints[0].MeasurementTs)
	assert.InDelta(t, 60.0, findMetric(u2, "hw.gpu.utilization").Datapoints[0].GetGauge(), 0)
	assert.Equal(t, tg["instance.id"], tags(findMetric(u2, "hw.gpu.utilization").Tags)["instance.id"])

	// Counter: the first upload carries the whole total (the series began
	// after the exporter), the second the increment.
	c1, c2 := findMetric(u1, "gen_ai.client.token.usage.total"), findMetric(u2, "gen_ai.client.token.usage.total")
	require.NotNil(t, c1)
	require.NotNil(t, c2)
	assert.Equal(t, signalsv1.Metric_COUNTER_METRIC, c1.Type)
	assert.InDelta(t, 10.0, c1.Datapoints[0].GetTotal(), 0)
	assert.InDelta(t, 15.0, c2.Datapoints[0].GetTotal(), 0)

	// Histogram: non-cumulative bins at the upper bound, overflow folded
	// into the last finite bound, delta count and sum, lifetime min/max.
	h1 := findMetric(u1, "gen_ai.server.time_to_first_token").Datapoints[0].GetHistogram()
	h2 := findMetric(u2, "gen_ai.server.time_to_first_token").Datapoints[0].GetHistogram()
	assert.Equal(t, []float64{0.1, 0.5}, h1.Bins)
	assert.Equal(t, []int64{1, 2}, h1.Counts)
	assert.Equal(t, []float64{0.5, 1}, h2.Bins)
	assert.Equal(t, []int64{3, 2}, h2.Counts)
	assert.Equal(t, int64(3), h1.GetCount())
	assert.Equal(t, int64(5), h2.GetCount())
	assert.InDelta(t, 3.6, h2.GetSum(), 1e-9)
	assert.InDelta(t, 0.05, h2.GetMin(), 0)
	assert.InDelta(t, 1.7, h2.GetMax(), 0)

	// Profile: kernel time table, one frame per kernel, frame_id = xxh64.
	p1, p2 := findMetric(u1, encode.ProfileKernels), findMetric(u2, encode.ProfileKernels)
	require.NotNil(t, p1)
	require.NotNil(t, p2)
	assert.Equal(t, signalsv1.Metric_PROFILE_METRIC, p1.Type)
	assert.Equal(t, "gemm", tags(p1.Tags)[names.AttrKernelCategory])
	assert.NotContains(t, tags(p1.Tags), names.AttrKernelName)
	frames := map[uint64]string{}
	for _, f := range p1.Frames {
		frames[f.FrameId] = f.Name
	}
	assert.Equal(t, map[uint64]string{
		xxhash.Sum64String("flash_fwd_kernel"): "flash_fwd_kernel",
		xxhash.Sum64String("sm90_xmma_gemm"):   "sm90_xmma_gemm",
	}, frames)
	prof := p1.Datapoints[0].GetProfile()
	got := map[string][2]uint64{}
	for i, id := range prof.FrameIds {
		got[frames[id]] = [2]uint64{prof.Values[i], prof.Samples[i]}
	}
	assert.Equal(t, map[string][2]uint64{"sm90_xmma_gemm": {3000, 3}, "flash_fwd_kernel": {1000, 1}}, got)
	// Second upload: only the kernel that ran again, with its increment.
	prof2 := p2.Datapoints[0].GetProfile()
	assert.Equal(t, []uint64{xxhash.Sum64String("sm90_xmma_gemm")}, prof2.FrameIds)
	assert.Equal(t, []uint64{2000}, prof2.Values)
	assert.Equal(t, []uint64{2}, prof2.Samples)
	require.Len(t, p2.Frames, 1)

	// Resources: host, process and device identities.
	kinds := map[string]map[string]string{}
	for _, r := range u1.Resources {
		kinds[r.Kind] = tags(r.Tags)
		assert.Positive(t, r.FirstSeenTs)
		assert.GreaterOrEqual(t, r.LastSeenTs, r.FirstSeenTs)
	}
	global := map[string]string{"deployment": "test", "region": "eu-west", "instance.id": tg["instance.id"]}
	with := func(m map[string]string) map[string]string {
		for k, v := range global {
			m[k] = v
		}
		return m
	}
	assert.Equal(t, with(map[string]string{"host.name": "gpu-node-1"}), kinds["host"])
	assert.Equal(t, with(map[string]string{"host.name": "gpu-node-1", "process.pid": "4242"}), kinds["process"])
	assert.Equal(t, with(map[string]string{"host.name": "gpu-node-1", "hw.id": "0"}), kinds["device"])

	// Privacy: the prompt never leaves, not even inside a command line.
	assert.False(t, h.srv.Contains(prompt))
	assert.False(t, h.srv.Contains("SECRET"))
}

func TestCounterResetSendsFullTotal(t *testing.T) {
	h := newHarness(t, nil)
	start := time.Now()
	c := cumulative{start: start, ts: start.Add(time.Second), counter: 100, histCounts: []uint64{0, 0, 0, 0}}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), c.build()))
	c.ts, c.counter = start.Add(2*time.Second), 7 // the source restarted
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), c.build()))
	c.ts, c.counter = start.Add(3*time.Second), 7 // nothing new: no counter datapoint
	c.gauge = 1
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), c.build()))
	ups := h.srv.Accepted()
	require.Len(t, ups, 3)
	assert.InDelta(t, 100.0, findMetric(ups[0].V1, "gen_ai.client.token.usage.total").Datapoints[0].GetTotal(), 0)
	assert.InDelta(t, 7.0, findMetric(ups[1].V1, "gen_ai.client.token.usage.total").Datapoints[0].GetTotal(), 0)
	assert.Nil(t, findMetric(ups[2].V1, "gen_ai.client.token.usage.total"))
}

func newLogs() plog.Logs {
	ld := plog.NewLogs()
	for _, gpu := range []string{"0", "1"} {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr(names.ResourceHostName, "gpu-node-1")
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for _, sev := range []plog.SeverityNumber{plog.SeverityNumberError, plog.SeverityNumberWarn, plog.SeverityNumberInfo, plog.SeverityNumberFatal} {
			lr := lrs.AppendEmpty()
			lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(1700000000, 0)))
			lr.SetSeverityNumber(sev)
			lr.Body().SetStr("XID error 79 on GPU " + gpu + " (" + sev.String() + ")")
			lr.Attributes().PutStr(names.AttrDeviceID, gpu)
			lr.Attributes().PutInt("hw.gpu.xid", 79)
			if sev == plog.SeverityNumberFatal {
				lr.Attributes().PutStr("exception.type", "EngineDeadError")
				lr.Attributes().PutStr("exception.message", "engine core died")
			}
		}
	}
	return ld
}

func TestUploadLogs(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.logsExp.ConsumeLogs(t.Context(), newLogs()))
	ups := h.srv.Accepted()
	require.Len(t, ups, 1)
	req := ups[0].V1
	require.Len(t, req.LogBatches, 2, "one batch per tag set (GPU 0, GPU 1)")
	for _, lb := range req.LogBatches {
		tg := tags(lb.Tags)
		assert.Equal(t, "79", tg["hw.gpu.xid"])
		assert.NotContains(t, tg, "exception.type")
		var levels []signalsv1.LogEntry_LogLevel
		for _, e := range lb.LogEntries {
			levels = append(levels, e.Level)
			assert.Contains(t, e.Message, "XID error 79 on GPU "+tg["hw.id"])
			assert.Equal(t, int64(1700000000)*1e9, e.LogTs)
		}
		assert.Equal(t, []signalsv1.LogEntry_LogLevel{
			signalsv1.LogEntry_ERROR_LEVEL, signalsv1.LogEntry_WARNING_LEVEL,
			signalsv1.LogEntry_INFO_LEVEL, signalsv1.LogEntry_CRITICAL_LEVEL,
		}, levels)
		// The type stays; the message is error text, which can quote prompts.
		assert.Equal(t, "EngineDeadError: "+privacy.ErrorTextMarker, lb.LogEntries[3].Exception)
	}
}

func TestLevelFromText(t *testing.T) {
	for text, want := range map[string]signalsv1.LogEntry_LogLevel{
		"WARNING": signalsv1.LogEntry_WARNING_LEVEL, "error": signalsv1.LogEntry_ERROR_LEVEL,
		"Critical": signalsv1.LogEntry_CRITICAL_LEVEL, "debug": signalsv1.LogEntry_DEBUG_LEVEL,
		"trace": signalsv1.LogEntry_DEBUG_LEVEL, "": signalsv1.LogEntry_INFO_LEVEL,
	} {
		assert.Equal(t, want, encode.Level(plog.SeverityNumberUnspecified, text), text)
	}
}

func TestFailureClasses(t *testing.T) {
	for _, tc := range []struct {
		status    int
		permanent bool
		log       string
	}{
		{http.StatusUnauthorized, true, "refused the API key"},
		{http.StatusForbidden, true, "refused the API key"},
		{http.StatusBadRequest, true, "rejected an upload as malformed"},
		{http.StatusNotFound, true, ""},
		{http.StatusTooManyRequests, false, ""},
		{http.StatusInternalServerError, false, ""},
		{http.StatusServiceUnavailable, false, ""},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			h := newHarness(t, nil)
			h.srv.SetResponder(func(*graphsignaltest.Upload) (int, http.Header) { return tc.status, nil })
			start := time.Now()
			err := h.metrics.ConsumeMetrics(t.Context(), cumulative{start: start, ts: start.Add(time.Second), counter: 3, histCounts: []uint64{0, 0, 0, 0}}.build())
			require.Error(t, err)
			assert.Equal(t, tc.permanent, consumererror.IsPermanent(err), "%v", err)
			if tc.log != "" {
				assert.Equal(t, 1, h.logs.FilterMessageSnippet(tc.log).Len())
			}
			// A failure that will be retried says so once, at warn: the
			// user sees uploads failing without raising the log level.
			retrying := h.logs.FilterMessageSnippet("Graphsignal upload failed; retrying")
			if tc.permanent {
				assert.Zero(t, retrying.Len())
			} else if assert.Equal(t, 1, retrying.Len()) {
				assert.Equal(t, zapcore.WarnLevel, retrying.All()[0].Level)
				assert.Contains(t, retrying.All()[0].ContextMap()["error"], strconv.Itoa(tc.status))
			}
			for _, e := range h.logs.All() {
				assert.NotContains(t, e.Message, "test-key")
				for _, f := range e.Context {
					assert.NotContains(t, f.String, "test-key")
				}
			}
			if tc.status == http.StatusBadRequest {
				metadatatest.AssertEqualGraphsignalRejectedUploads(t, h.tel,
					[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
				// The counter and the gauge; the empty histogram carried nothing.
				metadatatest.AssertEqualGraphsignalRejectedItems(t, h.tel,
					[]metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		// Without Retry-After the next try would come 10 ms later.
		cfg.RetryConfig.Enabled = true
		cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
		cfg.RetryConfig.RandomizationFactor = 0
	})
	var calls atomic.Int32
	arrivals := make(chan time.Time, 2)
	h.srv.SetResponder(func(*graphsignaltest.Upload) (int, http.Header) {
		arrivals <- time.Now()
		if calls.Add(1) == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}
		}
		return http.StatusOK, nil
	})
	start := time.Now()
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), cumulative{start: start, ts: start.Add(time.Second), counter: 1, histCounts: []uint64{0, 0, 0, 0}}.build()))
	first, second := <-arrivals, <-arrivals
	assert.GreaterOrEqual(t, second.Sub(first), 2*time.Second-50*time.Millisecond, "the retry waited for Retry-After")
	assert.Len(t, h.srv.Accepted(), 1)
	assert.Len(t, h.srv.Uploads(), 2)
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, "99999999": time.Hour,
		now.Add(30 * time.Second).Format(http.TimeFormat): 30 * time.Second,
	} {
		d, ok := retryAfter(in, now)
		assert.True(t, ok, in)
		assert.Equal(t, want, d, in)
	}
	for _, in := range []string{"", "-1", "soon"} {
		_, ok := retryAfter(in, now)
		assert.False(t, ok, in)
	}
}

// gaugeBatch is one batch of n gauge points whose values are unique across
// batches, so a test can tell which arrived.
func gaugeBatch(batch, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	dps := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("test.seq")
	for i := 0; i < n; i++ {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(1 + batch))
		dp.SetDoubleValue(float64(batch*n + i))
		dp.Attributes().PutInt("point", int64(i))
	}
	return md
}

func seen(ups []*graphsignaltest.Upload) map[float64]int {
	out := map[float64]int{}
	for _, u := range ups {
		for _, m := range u.V1.GetMetrics() {
			if m.Name == "test.seq" {
				for _, dp := range m.Datapoints {
					out[dp.GetGauge()]++
				}
			}
		}
	}
	return out
}

func TestServerDownThenBack(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		q := exporterhelper.NewDefaultQueueConfig()
		cfg.QueueConfig = configoptional.Some(q)
		cfg.RetryConfig.Enabled = true
		cfg.RetryConfig.InitialInterval = 20 * time.Millisecond
		cfg.RetryConfig.MaxInterval = 200 * time.Millisecond
		cfg.RetryConfig.MaxElapsedTime = 0 // retry until it works
		cfg.ClientConfig.Timeout = 5 * time.Second
	})
	h.srv.Close()
	const batches, per = 20, 5
	for b := 0; b < batches; b++ {
		require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), gaugeBatch(b, per)))
	}
	require.Empty(t, h.srv.Uploads())
	require.NoError(t, h.srv.Restart())
	require.Eventually(t, func() bool { return len(seen(h.srv.Accepted())) == batches*per }, 30*time.Second, 20*time.Millisecond)
	got := seen(h.srv.Accepted())
	dups := 0
	for v := 0; v < batches*per; v++ {
		require.GreaterOrEqual(t, got[float64(v)], 1, "datapoint %d lost", v)
		dups += got[float64(v)] - 1
	}
	// At least once: an upload whose answer was lost is sent again.
	t.Logf("all %d datapoints delivered, %d duplicates", batches*per, dups)
}

func TestSlowServerTimeoutAndBoundedQueue(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		q := exporterhelper.NewDefaultQueueConfig()
		q.QueueSize = 4
		q.NumConsumers = 1
		cfg.QueueConfig = configoptional.Some(q)
		cfg.RetryConfig.Enabled = true
		// After its first attempt times out, the one consumer waits an hour
		// to retry: it stays busy and the queue cannot drain.
		cfg.RetryConfig.InitialInterval = time.Hour
		cfg.RetryConfig.MaxElapsedTime = 2 * time.Hour
		cfg.ClientConfig.Timeout = 50 * time.Millisecond
	})
	release := make(chan struct{})
	defer close(release)
	h.srv.Hold(release)
	var full int
	for b := 0; b < 20; b++ {
		err := h.metrics.ConsumeMetrics(t.Context(), gaugeBatch(b, 1))
		if err != nil {
			require.ErrorIs(t, err, exporterhelper.ErrQueueIsFull)
			full++
		}
	}
	// The queue holds 4 and the consumer 1 in flight at most: the rest is
	// refused at once rather than piling up.
	assert.GreaterOrEqual(t, full, 20-5)
	// The per-attempt timeout cut the held request.
	require.Eventually(t, func() bool { return h.srv.Cancelled() >= 1 }, 10*time.Second, 10*time.Millisecond)
}

func TestLocalSignals(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.APIKey = "" })
	start := time.Now()
	c := cumulative{
		start: start, ts: start.Add(time.Second), counter: 10,
		histCounts: []uint64{2, 6, 1, 1}, histSum: 5, histMin: 0.05, hisMax: 1.5, gauge: 55,
		kernelNs:    map[string]int64{"sm90_xmma_gemm": 3000, "flash_fwd_kernel": 1000},
		kernelCount: map[string]int64{"sm90_xmma_gemm": 3, "flash_fwd_kernel": 1},
	}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), c.build()))
	c.ts, c.counter, c.gauge = start.Add(2*time.Second), 25, 60
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), c.build()))
	require.NoError(t, h.logsExp.ConsumeLogs(t.Context(), newLogs()))
	assert.Empty(t, h.srv.Uploads(), "no api_key: nothing uploaded")

	// Health is health_check's, the dashboard and the timeline
	// inferprof_ui's: /signals is all this listener serves.
	for _, path := range []string{"/health", "/", "/timeline", "/dashboard.json"} {
		resp, err := http.Get(h.localURL() + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}

	resp, err := http.Get(h.localURL() + "/signals")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var doc map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	assert.Equal(t, map[string]any{"name": "inferprof", "version": "test"}, doc["profiler"])
	assert.Equal(t, "test", doc["context"].(map[string]any)["deployment"])
	assert.Positive(t, doc["payload_ns"])
	assert.Positive(t, doc["start_ns"])
	byName := map[string]map[string]any{}
	for _, m := range doc["metrics"].([]any) {
		mm := m.(map[string]any)
		byName[mm["name"].(string)] = mm
	}
	assert.Equal(t, "gauge", byName["hw.gpu.utilization"]["type"])
	assert.Equal(t, map[string]any{"value": 60.0}, byName["hw.gpu.utilization"]["stats"])
	assert.Equal(t, "counter", byName["gen_ai.client.token.usage.total"]["type"])
	assert.Equal(t, map[string]any{"total": 25.0}, byName["gen_ai.client.token.usage.total"]["stats"])
	// 10 observations: bins 0.1×2, 0.5×6, 1×2 (overflow folded). The 5th
	// (p50) is in (0.1, 0.5], the 10th (p95) in the last bucket, which only
	// max bounds: (0.5, 1.5]. The estimates are interpolated inside them.
	hs := byName["gen_ai.server.time_to_first_token"]["stats"].(map[string]any)
	assert.Equal(t, "bucket_interpolation", hs["quantile_method"])
	assert.Equal(t, []any{0.1, 0.5}, hs["p50_bucket"])
	assert.Equal(t, []any{0.5, 1.5}, hs["p95_bucket"])
	assert.InDelta(t, 0.1+(5.0-2)/6*0.4, hs["p50"], 1e-9)
	assert.InDelta(t, 0.5+(9.5-8)/2*1.0, hs["p95"], 1e-9)
	for k, v := range map[string]float64{"count": 10, "sum": 5, "min": 0.05, "max": 1.5, "mean": 0.5} {
		assert.InDelta(t, v, hs[k], 1e-12, k)
	}
	assert.Equal(t, "profile", byName[encode.ProfileKernels]["type"])
	assert.Equal(t, map[string]any{"frames": []any{
		map[string]any{"name": "sm90_xmma_gemm", "value": 3000.0, "samples": 3.0},
		map[string]any{"name": "flash_fwd_kernel", "value": 1000.0, "samples": 1.0},
	}}, byName[encode.ProfileKernels]["stats"])
	errs := doc["errors"].([]any)
	require.Len(t, errs, 6, "warning and above only")
	levels := map[string]int{}
	for _, e := range errs {
		levels[e.(map[string]any)["level"].(string)]++
	}
	assert.Equal(t, map[string]int{"error": 2, "warning": 2, "critical": 2}, levels)
	kinds := map[string]int{}
	for _, r := range doc["resources"].([]any) {
		rr := r.(map[string]any)
		kinds[rr["kind"].(string)]++
		assert.Less(t, rr["first_seen_ts"].(float64), 1e11, "seconds, not ns")
	}
	assert.Equal(t, map[string]int{"host": 1, "process": 1, "device": 1}, kinds)
}

func TestLocalEndpointWarnsWhenNotLoopback(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Local.NetAddr.Endpoint = "0.0.0.0:0" })
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("not a loopback address").Len())
	assert.True(t, local.IsLoopback("127.0.0.1:18259"))
	assert.True(t, local.IsLoopback("[::1]:1"))
	assert.False(t, local.IsLoopback(":18259"))
}

func spansWithPrompt() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	rs.Resource().Attributes().PutStr(names.ResourceHostName, "gpu-node-1")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("llm_request")
	sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetParentSpanID(pcommon.SpanID{8, 7, 6, 5, 4, 3, 2, 1})
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_001_000_000_000)
	sp.Attributes().PutStr("gen_ai.prompt", prompt)
	sp.Attributes().PutStr("gen_ai.completion", "SECRET ANSWER")
	sp.Attributes().PutStr(names.AttrRequestModel, "llama-3-8b")
	sp.Attributes().PutDouble(names.AttrTimeToFirstToken, 0.25)
	sp.Attributes().PutInt("gen_ai.usage.prompt_tokens", 12)
	ev := sp.Events().AppendEmpty()
	ev.SetName("gen_ai.content.prompt")
	ev.Attributes().PutStr("gen_ai.prompt", prompt)
	ev2 := sp.Events().AppendEmpty()
	ev2.SetName("first_token")
	ev2.Attributes().PutStr("gen_ai.output.messages", "SECRET ANSWER")
	sp.Status().SetCode(ptrace.StatusCodeError)
	return td
}

func TestTracesMode(t *testing.T) {
	srv := graphsignaltest.NewServer(t)
	cfg := syncConfig(srv.URL)
	f := NewFactory()
	set := metadatatest.NewSettings(componenttest.NewTelemetry())
	_, err := f.CreateTraces(t.Context(), set, cfg)
	require.ErrorIs(t, err, errTracesOff, "off by default")

	cfg.Traces.Enabled = true
	exp, err := f.CreateTraces(t.Context(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
	require.NoError(t, exp.ConsumeTraces(t.Context(), spansWithPrompt()))
	ups := srv.Accepted()
	require.Len(t, ups, 1)
	assert.Equal(t, "/api/v1/signals/", ups[0].Path)
	require.Len(t, ups[0].V0.Spans, 1)
	sp := ups[0].V0.Spans[0]
	assert.Equal(t, "vllm.llm_request", sp.Name)
	assert.Equal(t, "0102030405060708", sp.SpanId)
	assert.Equal(t, "0807060504030201", sp.ParentSpanId)
	assert.Equal(t, "0102030405060708090a0b0c0d0e0f10", sp.TraceId)
	assert.Equal(t, int64(1_700_000_001_000_000_000), sp.EndTs)
	spanTags := map[string]string{}
	for _, tg := range sp.Tags {
		spanTags[tg.Key] = tg.Value
	}
	assert.Equal(t, "error", spanTags["span.status"])
	assert.Equal(t, "gpu-node-1", spanTags["host.name"])
	assert.Len(t, spanTags["instance.id"], 12)
	counters := map[string]float64{}
	for _, c := range sp.Counters {
		counters[c.Name] = c.Value
	}
	assert.Equal(t, map[string]float64{names.AttrTimeToFirstToken: 0.25, "gen_ai.usage.prompt_tokens": 12}, counters)
	require.Len(t, sp.Attributes, 1)
	assert.Equal(t, names.AttrRequestModel, sp.Attributes[0].Name)
	require.Len(t, sp.Events, 1)
	assert.Equal(t, "first_token", sp.Events[0].Name)
	assert.Empty(t, sp.Events[0].Attributes)
	assert.False(t, srv.Contains("SECRET"))
}

func TestShutdownWithoutStart(t *testing.T) {
	cfg := syncConfig("http://127.0.0.1:1")
	exp, err := NewFactory().CreateMetrics(t.Context(), metadatatest.NewSettings(componenttest.NewTelemetry()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Shutdown(t.Context()))
	require.NoError(t, exp.Shutdown(t.Context()))
}

// The cupti receiver emits its kernel table as delta sums in seconds.
func TestKernelProfileFromCuptiDeltaSeconds(t *testing.T) {
	h := newHarness(t, nil)
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	for _, spec := range []struct {
		name, unit string
		v          float64
	}{{names.MetricKernelDuration, "s", 0.0000035}, {names.MetricKernelCount, "{kernel}", 7}} {
		m := ms.AppendEmpty()
		m.SetName(spec.name)
		m.SetUnit(spec.unit)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		dp := s.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		if spec.unit == "s" {
			dp.SetDoubleValue(spec.v)
		} else {
			dp.SetIntValue(int64(spec.v))
		}
		dp.Attributes().PutStr(names.AttrKernelName, "flash::flash_fwd_kernel")
		dp.Attributes().PutStr(names.AttrKernelCategory, "attention_prefill")
		dp.Attributes().PutStr(names.AttrDeviceID, "1")
	}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), md))
	ups := h.srv.Accepted()
	require.Len(t, ups, 1)
	p := findMetric(ups[0].V1, encode.ProfileKernels)
	require.NotNil(t, p)
	prof := p.Datapoints[0].GetProfile()
	assert.Equal(t, []uint64{xxhash.Sum64String("flash::flash_fwd_kernel")}, prof.FrameIds)
	assert.Equal(t, []uint64{3500}, prof.Values, "seconds to ns")
	assert.Equal(t, []uint64{7}, prof.Samples)
	assert.Equal(t, "1", tags(p.Tags)[names.AttrDeviceID])
}
