// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// otelPython is the pinned OpenTelemetry Python SDK venv's python
// (e2e/otelpy/install.sh; make test passes it as INFERPROF_OTEL_PYTHON).
func otelPython(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("INFERPROF_OTEL_PYTHON"); p != "" {
		require.FileExists(t, p, "INFERPROF_OTEL_PYTHON")
		return p
	}
	out, err := exec.Command(filepath.Join(e2etest.RepoRoot(), "e2e", "otelpy", "install.sh")).Output()
	require.NoError(t, err, "e2e/otelpy/install.sh: the pinned OpenTelemetry Python SDK")
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "python")
}

type sendResult struct {
	Result  string  `json:"result"`
	Spans   int     `json:"spans"`
	Seconds float64 `json:"seconds"`
}

// pySend sends count vLLM-shaped request spans with the real SDK's OTLP
// exporter (e2e/otelpy/send.py) and returns what the exporter reported.
func pySend(t *testing.T, protocol, endpoint, compression string, count int, prefix string) sendResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), otelPython(t), filepath.Join(e2etest.RepoRoot(), "e2e", "otelpy", "send.py"),
		"--protocol", protocol, "--endpoint", endpoint, "--compression", compression,
		"--count", strconv.Itoa(count), "--id-prefix", prefix)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r sendResult
	require.NoError(t, json.Unmarshal(out, &r), "send.py printed %q; stderr:\n%s", out, stderr.String())
	if err != nil {
		r.Result = "FAILURE: " + stderr.String()
	}
	return r
}

// TestPythonSDKExportersWithGzip: the engines' own SDK, with the gzip
// compression a user turns on (OTEL_EXPORTER_OTLP_COMPRESSION), over both
// of the shipped config's listeners. request_guard scans the body after
// confighttp/gRPC decompressed it, so compressed requests pass it.
func TestPythonSDKExportersWithGzip(t *testing.T) {
	ports := e2etest.NewPorts(t)
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")},
		Env: append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_METRICS_FLUSH_INTERVAL=200ms")})

	for _, tc := range []struct {
		protocol, endpoint, compression string
		count                           int
	}{
		{"grpc", ports.Addr("otlp_grpc"), "gzip", 3},
		{"http", ports.Addr("otlp_http"), "gzip", 4},
		{"http", ports.Addr("otlp_http"), "none", 5},
	} {
		r := pySend(t, tc.protocol, tc.endpoint, tc.compression, tc.count, "cmpl-"+tc.protocol+"-"+tc.compression+"-")
		assert.Equalf(t, "SUCCESS", r.Result, "%s %s", tc.protocol, tc.compression)
	}
	require.Eventually(t, func() bool { return promRequests(ports.Addr("prometheus")) == 12 },
		60*time.Second, 100*time.Millisecond, "the collector did not count the SDK's 12 requests (got %v)",
		promRequests(ports.Addr("prometheus")))
}

// httpSink is an OTLP/HTTP backend that answers the first failures requests
// with status (and Retry-After: 0), then 200, counting spans by answer.
type httpSink struct {
	mu                 sync.Mutex
	failures, status   int
	refused, accepted  int // spans
	requests, answered int
}

func (s *httpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := ptraceotlp.NewExportRequest()
	if err != nil || req.UnmarshalProto(body) != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if s.requests <= s.failures {
		s.refused += req.Traces().SpanCount()
		w.Header().Set("Retry-After", "0")
		http.Error(w, "try again", s.status)
		return
	}
	s.accepted += req.Traces().SpanCount()
	s.answered++
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := ptraceotlp.NewExportResponse().MarshalProto()
	_, _ = w.Write(b)
}

func (s *httpSink) counts() (refused, accepted, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused, s.accepted, s.requests
}

// TestPythonSDKRetriesThroughTheBinary: with no sending queue, a backend's
// 503 or 429 comes back through the collector to the sender as a retryable
// answer (gRPC Unavailable / HTTP 503 or 429), and the engine's SDK retries
// until the backend takes the spans: none lost, none accepted twice.
func TestPythonSDKRetriesThroughTheBinary(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		for _, protocol := range []string{"grpc", "http"} {
			t.Run(protocol+"/"+strconv.Itoa(status), func(t *testing.T) {
				sink := &httpSink{failures: 2, status: status}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				srv := &http.Server{Handler: sink, ReadHeaderTimeout: 5 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				t.Cleanup(func() { _ = srv.Close() })

				ports := e2etest.NewPorts(t)
				cfg := e2etest.Render(t, ports, t.TempDir(), `
receivers:
  otlp:
    protocols:
      grpc: {endpoint: '{{addr "grpc"}}'}
      http: {endpoint: '{{addr "http"}}'}
exporters:
  otlp_http/sink:
    endpoint: http://`+ln.Addr().String()+`
    compression: none
    # No queue and no retries of its own: the backend's answer goes back
    # to the sender, whose SDK retries.
    sending_queue: {enabled: false}
    retry_on_failure: {enabled: false}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp_http/sink]
`)
				e2etest.Start(t, e2etest.Options{Config: cfg})
				endpoint := ports.Addr(protocol)
				r := pySend(t, protocol, endpoint, "gzip", 3, "cmpl-retry-")
				assert.Equal(t, "SUCCESS", r.Result, "the SDK's export after the backend's %d", status)
				refused, accepted, requests := sink.counts()
				assert.Equal(t, 3, accepted, "every span accepted once")
				assert.Equal(t, 6, refused, "two refused attempts of 3 spans before")
				assert.Equal(t, 3, requests)
			})
		}
	}
}

// partialSink is an OTLP/gRPC backend that takes every request but answers
// that it rejected one span of each, as a backend over its quota does.
type partialSink struct {
	ptraceotlp.UnimplementedGRPCServer
	mu       sync.Mutex
	requests int
	spans    int
	ids      map[string]int
}

func (s *partialSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.spans += req.Traces().SpanCount()
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s.ids[spans.At(k).SpanID().String()]++
			}
		}
	}
	resp := ptraceotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedSpans(1)
	resp.PartialSuccess().SetErrorMessage("over quota: 1 span dropped")
	return resp, nil
}

func (s *partialSink) maxCopies() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	most := 0
	for _, n := range s.ids {
		most = max(most, n)
	}
	return len(s.ids), most
}

// TestGatewayReadsAPartialSuccessOnce: the shipped gateway (default
// in-memory queue) exports to a backend that keeps the request but rejects
// part of it. The collector says so in its log with the backend's message
// and counts, does not send the request again (a partial success is not a
// retryable failure), and keeps serving.
func TestGatewayReadsAPartialSuccessOnce(t *testing.T) {
	sink := &partialSink{ids: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(gs, sink)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)

	ports := e2etest.NewPorts(t)
	gwPort := ports.Port("gateway_grpc")
	gw := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env: append(gatewayEnv(t, ports, "gateway", "127.0.0.1", gwPort, ln.Addr().String()),
			"INFERPROF_METRICS_FLUSH_INTERVAL=200ms")})
	r := pySend(t, "grpc", ports.Addr("gateway_grpc"), "gzip", 4, "cmpl-partial-")
	require.Equal(t, "SUCCESS", r.Result)
	// The gateway adds phase spans of its own: more than the 4 sent reach
	// the backend.
	require.Eventually(t, func() bool { n, _ := sink.maxCopies(); return n >= 4 },
		60*time.Second, 100*time.Millisecond, "the backend never received the spans")
	require.Eventually(t, func() bool { return strings.Contains(gw.Output(), "over quota: 1 span dropped") },
		30*time.Second, 100*time.Millisecond, "the gateway did not log the backend's partial success")
	// A later request still goes through, and nothing was sent twice.
	r = pySend(t, "grpc", ports.Addr("gateway_grpc"), "gzip", 1, "cmpl-partial-later-")
	require.Equal(t, "SUCCESS", r.Result)
	require.Eventually(t, func() bool { n, _ := sink.maxCopies(); return n >= 5 },
		60*time.Second, 100*time.Millisecond)
	_, most := sink.maxCopies()
	assert.Equal(t, 1, most, "a partially accepted request was sent again")
	assert.NotContains(t, gw.Output(), "panic")
}
