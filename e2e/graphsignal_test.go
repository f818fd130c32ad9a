// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/attribute"
	otelmetric "go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/e2etest"
)

const e2ePrompt = "E2E-SECRET-PROMPT what is the capital of France"

// postOTLP sends an OTLP/HTTP protobuf request the way an SDK does and
// requires a 200: the collector accepted (and queued) the data.
func postOTLP(t *testing.T, url string, body []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func postMetrics(t *testing.T, addr string, md pmetric.Metrics) {
	t.Helper()
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)
	postOTLP(t, "http://"+addr+"/v1/metrics", b)
}

func postLogs(t *testing.T, addr string, ld plog.Logs) {
	t.Helper()
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	postOTLP(t, "http://"+addr+"/v1/logs", b)
}

// engineMetrics is a cumulative counter and a gauge from one engine process,
// as the prometheus receiver makes them of vLLM's /metrics (vLLM sends no
// OTLP metrics; an SDK would neither name them vllm:* nor set their times).
func engineMetrics(start, ts time.Time, tokens int64, kvUsage float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vllm")
	rm.Resource().Attributes().PutStr("host.name", "e2e-node")
	rm.Resource().Attributes().PutInt("process.pid", 777)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	c := ms.AppendEmpty()
	c.SetName("vllm:generation_tokens")
	sum := c.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetIntValue(tokens)
	g := ms.AppendEmpty()
	g.SetName("vllm:kv_cache_usage_perc")
	gdp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gdp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	gdp.SetDoubleValue(kvUsage)
	gdp.Attributes().PutStr("gen_ai.prompt", e2ePrompt)
	return md
}

// xidLog is the nvml receiver's XID event, a collector's record, no SDK's.
func xidLog() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", "e2e-node")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Body().SetStr("XID error 79")
	lr.Attributes().PutStr("hw.id", "0")
	return ld
}

type signalsDoc struct {
	Context map[string]string `json:"context"`
	Metrics []struct {
		Name  string            `json:"name"`
		Type  string            `json:"type"`
		Tags  map[string]string `json:"tags"`
		Stats map[string]any    `json:"stats"`
	} `json:"metrics"`
	Errors []struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	} `json:"errors"`
}

func getSignals(t *testing.T, addr string) (signalsDoc, bool) {
	t.Helper()
	var doc signalsDoc
	resp, err := http.Get("http://" + addr + "/signals")
	if err != nil {
		return doc, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return doc, false
	}
	return doc, json.NewDecoder(resp.Body).Decode(&doc) == nil
}

func TestGraphsignalDefaultConfigServesSignals(t *testing.T) {
	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	env := append(defaultEnv(t, ports, t.TempDir()), "GRAPHSIGNAL_ENDPOINT="+srv.URL)
	c := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: env})

	start := time.Now()
	postMetrics(t, ports.Addr("otlp_http"), engineMetrics(start, start.Add(time.Second), 10, 0.25))
	postMetrics(t, ports.Addr("otlp_http"), engineMetrics(start, start.Add(2*time.Second), 25, 0.5))
	postLogs(t, ports.Addr("otlp_http"), xidLog())

	local := ports.Addr("graphsignal_local")
	var doc signalsDoc
	require.Eventually(t, func() bool {
		var ok bool
		doc, ok = getSignals(t, local)
		if !ok {
			return false
		}
		var tokens, xid bool
		for _, m := range doc.Metrics {
			tokens = tokens || (m.Name == "vllm:generation_tokens" && m.Stats["total"] == 25.0)
		}
		for _, e := range doc.Errors {
			xid = xid || e.Message == "XID error 79"
		}
		return tokens && xid
	}, 30*time.Second, 50*time.Millisecond)
	stats := map[string]map[string]any{}
	for _, m := range doc.Metrics {
		stats[m.Name] = m.Stats
	}
	assert.Equal(t, map[string]any{"total": 25.0}, stats["vllm:generation_tokens"])
	assert.Equal(t, map[string]any{"value": 0.5}, stats["vllm:kv_cache_usage_perc"])
	for _, e := range doc.Errors {
		if e.Message == "XID error 79" {
			assert.Equal(t, "error", e.Level)
		}
	}
	assert.Len(t, doc.Context["instance.id"], 12)

	// Health is health_check's (13133 in the shipped configs); this
	// listener serves /signals only.
	resp, err := http.Get("http://" + local + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Empty(t, srv.Uploads(), "no api_key: nothing leaves the host")
	assert.Contains(t, c.Output(), "No api_key")
}

func TestGraphsignalShippedConfigUploads(t *testing.T) {
	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	dataDir := t.TempDir()
	env := append(defaultEnv(t, ports, dataDir),
		"GRAPHSIGNAL_API_KEY=e2e-key", "GRAPHSIGNAL_ENDPOINT="+srv.URL, "GRAPHSIGNAL_TAG_CLUSTER=e2e")
	c := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("graphsignal.yaml")}, Env: env})

	// Request spans with prompt text go through the traces pipeline.
	tr := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "vllm"))
	spec := vllmRequest(time.Now().Add(-2 * time.Second))
	spec.Attributes = append(spec.Attributes, attribute.String("gen_ai.prompt", e2ePrompt))
	tr.Send(context.Background(), "vllm.tracing", spec)

	start := time.Now()
	postMetrics(t, ports.Addr("otlp_http"), engineMetrics(start, start.Add(time.Second), 10, 0.25))
	require.Eventually(t, func() bool { return totals(srv)["vllm:generation_tokens"] == 10 }, 30*time.Second, 50*time.Millisecond)
	postMetrics(t, ports.Addr("otlp_http"), engineMetrics(start, start.Add(2*time.Second), 25, 0.5))
	postLogs(t, ports.Addr("otlp_http"), xidLog())
	require.Eventually(t, func() bool {
		return totals(srv)["vllm:generation_tokens"] == 25 && xidLogged(srv)
	}, 30*time.Second, 50*time.Millisecond)

	require.Empty(t, srv.Malformed())
	var deltas []float64
	for _, u := range srv.Accepted() {
		assert.Equal(t, "e2e-key", u.APIKey)
		for _, m := range u.V1.GetMetrics() {
			tags := map[string]string{}
			for _, tg := range m.Tags {
				tags[tg.Key] = tg.Value
			}
			assert.Equal(t, "e2e", tags["cluster"])
			assert.Len(t, tags["instance.id"], 12)
			if m.Name == "vllm:generation_tokens" {
				for _, dp := range m.Datapoints {
					deltas = append(deltas, dp.GetTotal())
				}
			}
		}
	}
	assert.Equal(t, []float64{10, 15}, deltas, "counter deltas across two uploads")
	// Give the traces pipeline's own exports time to have happened: the
	// spans reach the file exporter, and their prompt must reach nowhere.
	require.Eventually(t, func() bool {
		return len(readTraces(t, filepath.Join(dataDir, "inferprof-traces.jsonl"))) > 0
	}, 30*time.Second, 100*time.Millisecond)
	assert.False(t, srv.Contains("E2E-SECRET-PROMPT"), "prompt text reached Graphsignal")
	assert.NotContains(t, c.Output(), "e2e-key", "the API key was logged")
}

func totals(srv *graphsignaltest.Server) map[string]float64 {
	out := map[string]float64{}
	for _, u := range srv.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			for _, dp := range m.Datapoints {
				out[m.Name] += dp.GetTotal()
			}
		}
	}
	return out
}

func xidLogged(srv *graphsignaltest.Server) bool {
	for _, u := range srv.Accepted() {
		for _, lb := range u.V1.GetLogBatches() {
			for _, e := range lb.LogEntries {
				if e.Message == "XID error 79" && e.Level == signalsv1.LogEntry_ERROR_LEVEL {
					return true
				}
			}
		}
	}
	return false
}

const killConfig = `
extensions:
  file_storage:
    directory: {{.Dir}}
    create_directory: true
receivers:
  otlp:
    protocols:
      http:
        endpoint: {{addr "otlp_http"}}
exporters:
  graphsignal:
    api_key: kill-key
    endpoint: ${env:GRAPHSIGNAL_ENDPOINT}
    local:
      endpoint: ""
    timeout: 2s
    retry_on_failure:
      initial_interval: 50ms
      max_interval: 200ms
      max_elapsed_time: 0
    sending_queue:
      storage: file_storage
      num_consumers: 2
service:
  extensions: [file_storage]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [graphsignal]
`

// seqSender is an application's gauge e2e.seq, one point per "point"
// attribute, from the Go SDK's meter over OTLP/HTTP.
type seqSender struct {
	mp    *sdkmetric.MeterProvider
	gauge otelmetric.Float64Gauge
}

func newSeqSender(t *testing.T, addr string) seqSender {
	t.Helper()
	mp := e2etest.NewSDKMeter(t, e2etest.SDKOptions{Endpoint: addr, HTTP: true,
		Resource: []attribute.KeyValue{attribute.String("service.name", "e2e-seq")}})
	g, err := mp.Meter("e2e").Float64Gauge("e2e.seq")
	require.NoError(t, err)
	return seqSender{mp: mp, gauge: g}
}

// send records n points whose values are unique across batches and
// exports them in one request the collector must accept (a gauge keeps its
// last value per attribute set: each export carries exactly these n).
func (s seqSender) send(t *testing.T, batch, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		s.gauge.Record(t.Context(), float64(batch*n+i), otelmetric.WithAttributes(attribute.Int("point", i)))
	}
	require.NoError(t, s.mp.ForceFlush(t.Context()))
}

func seqSeen(srv *graphsignaltest.Server) map[float64]int {
	out := map[float64]int{}
	for _, u := range srv.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			if m.Name == "e2e.seq" {
				for _, dp := range m.Datapoints {
					out[dp.GetGauge()]++
				}
			}
		}
	}
	return out
}

func TestGraphsignalPersistentQueueSurvivesSIGKILL(t *testing.T) {
	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	storage := t.TempDir()
	cfg := e2etest.Render(t, ports, storage, killConfig)
	env := []string{"GRAPHSIGNAL_ENDPOINT=" + srv.URL}
	c := e2etest.Start(t, e2etest.Options{Config: cfg, Env: env})

	// Phase 1: the service works; the first batches are delivered.
	const batches, per, delivered = 30, 10, 10
	app := newSeqSender(t, ports.Addr("otlp_http"))
	for b := 0; b < delivered; b++ {
		app.send(t, b, per)
	}
	require.Eventually(t, func() bool { return len(seqSeen(srv)) == delivered*per }, 30*time.Second, 20*time.Millisecond)

	// Phase 2: the service fails; the rest is accepted by the collector
	// (200 from its receiver means it is in the persistent queue) and kept
	// being retried when the collector is killed.
	var failed atomic.Int32
	srv.SetResponder(func(*graphsignaltest.Upload) (int, http.Header) {
		failed.Add(1)
		return http.StatusServiceUnavailable, nil
	})
	for b := delivered; b < batches; b++ {
		app.send(t, b, per)
	}
	require.Eventually(t, func() bool { return failed.Load() >= 2 }, 30*time.Second, 20*time.Millisecond)
	c.Kill()
	before := len(seqSeen(srv))
	t.Logf("delivered before SIGKILL: %d of %d datapoints", before, batches*per)
	require.Less(t, before, batches*per, "the kill must leave data queued")

	// Phase 3: restart on the same storage with the service back.
	srv.SetResponder(nil)
	e2etest.Start(t, e2etest.Options{Config: cfg, Env: env})
	require.Eventually(t, func() bool { return len(seqSeen(srv)) == batches*per }, 60*time.Second, 50*time.Millisecond)
	got := seqSeen(srv)
	dups := 0
	for v := 0; v < batches*per; v++ {
		require.GreaterOrEqual(t, got[float64(v)], 1, "datapoint %d lost", v)
		dups += got[float64(v)] - 1
	}
	// At least once: an upload in flight at the kill may be sent again.
	t.Logf("after restart: all %d datapoints delivered, %d duplicates", batches*per, dups)
}
