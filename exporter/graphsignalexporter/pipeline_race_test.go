// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
)

// These tests run a whole collector in the test process, so the race
// detector sees the real fan-out, exporterhelper's queue and batcher and
// the exporter together: the config users write (an API key, batching on,
// every signal fanned out to debug and two graphsignal exporters).

const pipelineConfig = `
extensions:
  file_storage:
    directory: %[3]s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %[1]s
exporters:
  debug: {}
  graphsignal:
    api_key: race-key
    endpoint: %[2]s
    local:
      endpoint: 127.0.0.1:0
    traces:
      enabled: true
    sending_queue:
      %[4]s
      batch:
        flush_timeout: 100ms
  graphsignal/second:
    api_key: race-key-2
    endpoint: %[2]s
    local:
      endpoint: ""
    traces:
      enabled: true
    sending_queue:
      %[4]s
service:
  extensions: [file_storage]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [debug, graphsignal, graphsignal/second]
    logs:
      receivers: [otlp]
      exporters: [debug, graphsignal, graphsignal/second]
    traces:
      receivers: [otlp]
      exporters: [debug, graphsignal, graphsignal/second]
`

func factories() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory(), graphsignalexporter.NewFactory()); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](filestorage.NewFactory()); err != nil {
		return f, err
	}
	f.Processors = map[component.Type]processor.Factory{}
	f.Connectors = map[component.Type]connector.Factory{}
	return f, nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(e2etest.FreePort(t))
}

// runCollector starts an in-process collector and stops it with the test.
func runCollector(t *testing.T, cfg string) {
	t.Helper()
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo:               component.BuildInfo{Command: "race", Version: "test"},
		Factories:               factories,
		DisableGracefulShutdown: true,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs:              []string{"yaml:" + cfg},
			ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
		}},
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- col.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			require.NoError(t, err, "collector stopped")
		default:
		}
		return col.GetState() == otelcol.StateRunning
	}, 30*time.Second, 10*time.Millisecond)
	t.Cleanup(func() {
		col.Shutdown()
		require.NoError(t, <-done)
	})
}

func post(url string, body []byte) error {
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}

// payloads are one request per signal, with values unique to (sender, i).
func payloads(sender, i int) (metrics, logs, traces []byte) {
	id := strconv.Itoa(sender*1000 + i)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "race-node")
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("race.gauge")
	dps := g.SetEmptyGauge().DataPoints()
	for p := 0; p < 20; p++ {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		dp.SetDoubleValue(float64(p))
		dp.Attributes().PutStr("id", id)
		dp.Attributes().PutInt("point", int64(p))
	}
	metrics, _ = pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()

	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for r := 0; r < 10; r++ {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.Body().SetStr("race " + id + "/" + strconv.Itoa(r))
	}
	logs, _ = plogotlp.NewExportRequestFromLogs(ld).MarshalProto()

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("race " + id)
	sp.SetTraceID(pcommon.TraceID{1, byte(sender), byte(i)})
	sp.SetSpanID(pcommon.SpanID{2, byte(sender), byte(i)})
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	traces, _ = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	return metrics, logs, traces
}

type counts struct{ points, logs, spans int }

func received(srv *graphsignaltest.Server, key string) counts {
	var c counts
	for _, u := range srv.Accepted() {
		if u.APIKey != key {
			continue
		}
		for _, m := range u.V1.GetMetrics() {
			c.points += len(m.Datapoints)
		}
		for _, lb := range u.V1.GetLogBatches() {
			for _, e := range lb.LogEntries {
				if strings.HasPrefix(e.Message, "race ") {
					c.logs++
				}
			}
		}
		c.spans += len(u.V0.GetSpans())
	}
	return c
}

func runRace(t *testing.T, queue string) {
	srv := graphsignaltest.NewServer(t)
	addr := freeAddr(t)
	runCollector(t, fmt.Sprintf(pipelineConfig, addr, srv.URL, t.TempDir(), queue))

	const senders, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, senders*each*3)
	for s := 0; s < senders; s++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				m, l, tr := payloads(s, i)
				errs <- post("http://"+addr+"/v1/metrics", m)
				errs <- post("http://"+addr+"/v1/logs", l)
				errs <- post("http://"+addr+"/v1/traces", tr)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	want := counts{points: senders * each * 20, logs: senders * each * 10, spans: senders * each}
	for _, key := range []string{"race-key", "race-key-2"} {
		require.Eventuallyf(t, func() bool { return received(srv, key) == want }, 30*time.Second, 20*time.Millisecond,
			"%s: got %+v, want %+v", key, received(srv, key), want)
	}
	assert.Empty(t, srv.Malformed())
}

// TestRaceFanOutInMemoryQueue: the default in-memory queue, batching on.
func TestRaceFanOutInMemoryQueue(t *testing.T) {
	runRace(t, "enabled: true")
}

// TestRaceFanOutPersistentQueue: the queue on file_storage.
func TestRaceFanOutPersistentQueue(t *testing.T) {
	runRace(t, "storage: file_storage")
}
