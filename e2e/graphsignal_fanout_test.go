// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// fanoutConfig is what a new user wrote when the collector panicked with
// "invalid access to shared data": an API key, the default in-memory
// sending queue (batching on), and logs fanned out to debug and graphsignal.
const fanoutConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: {{addr "otlp_http"}}
exporters:
  debug: {}
  graphsignal:
    api_key: fanout-key
    endpoint: ${env:GRAPHSIGNAL_ENDPOINT}
    local:
      endpoint: {{addr "graphsignal_local"}}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [debug, graphsignal]
`

// sendErrorLogs emits n ERROR records, whose messages are unique across
// requests, with the Go SDK's logger and exports them in one OTLP/HTTP
// request the collector must accept.
func sendErrorLogs(t *testing.T, l *e2etest.Logger, req, n int) {
	t.Helper()
	logger := l.Logger("vllm.engine")
	now := time.Now()
	for i := 0; i < n; i++ {
		var r otellog.Record
		r.SetTimestamp(now)
		r.SetSeverity(otellog.SeverityError)
		r.SetBody(attribute.StringValue("engine error " + strconv.Itoa(req*n+i)))
		logger.Emit(t.Context(), r)
	}
	l.Flush(t)
}

func uploadedMessages(srv *graphsignaltest.Server) map[string]int {
	out := map[string]int{}
	for _, u := range srv.Accepted() {
		for _, lb := range u.V1.GetLogBatches() {
			for _, e := range lb.GetLogEntries() {
				out[e.GetMessage()]++
			}
		}
	}
	return out
}

// TestGraphsignalLogsFanOutWithBatching is the crash a new user hit: with
// batching on, exporterhelper's batcher merges log requests in place, which
// panics on data the fan-out shared read-only between debug and graphsignal.
// Several requests inside one flush interval make the batcher merge.
func TestGraphsignalLogsFanOutWithBatching(t *testing.T) {
	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), fanoutConfig)
	c := e2etest.Start(t, e2etest.Options{Config: cfg, Env: []string{"GRAPHSIGNAL_ENDPOINT=" + srv.URL}})

	const requests, per = 40, 25
	engine := e2etest.NewSDKLogger(t, e2etest.SDKOptions{Endpoint: ports.Addr("otlp_http"), HTTP: true, BatchSize: per,
		Resource: []attribute.KeyValue{attribute.String("service.name", "vllm"), attribute.String("host.name", "e2e-node")}})
	for r := 0; r < requests; r++ {
		sendErrorLogs(t, engine, r, per)
	}
	require.Eventually(t, func() bool {
		return len(uploadedMessages(srv)) == requests*per || c.Exited()
	}, 30*time.Second, 50*time.Millisecond)
	require.False(t, c.Exited(), "the collector died:\n%s", c.Output())
	assert.NotContains(t, c.Output(), "panic")
	got := uploadedMessages(srv)
	for i := 0; i < requests*per; i++ {
		assert.Equal(t, 1, got["engine error "+strconv.Itoa(i)], "record %d", i)
	}
	assert.Empty(t, srv.Malformed())
}
