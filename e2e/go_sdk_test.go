// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestGoSDKExportersWithGzip: the OpenTelemetry Go SDK's own OTLP trace
// exporters, otlptracegrpc and otlptracehttp, with the gzip compression a
// user turns on (OTEL_EXPORTER_OTLP_COMPRESSION), into both listeners of
// the shipped default config; every request span is counted once. The
// Python SDK's twin is TestPythonSDKExportersWithGzip.
func TestGoSDKExportersWithGzip(t *testing.T) {
	ports := e2etest.NewPorts(t)
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")},
		Env: append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_METRICS_FLUSH_INTERVAL=200ms")})

	want := 0
	for _, tc := range []struct {
		name  string
		opts  e2etest.SDKOptions
		count int
	}{
		{"grpc-gzip", e2etest.SDKOptions{Endpoint: ports.Addr("otlp_grpc"), Gzip: true}, 3},
		{"http-gzip", e2etest.SDKOptions{Endpoint: ports.Addr("otlp_http"), HTTP: true, Gzip: true}, 4},
		{"http-none", e2etest.SDKOptions{Endpoint: ports.Addr("otlp_http"), HTTP: true}, 5},
	} {
		tc.opts.Resource = e2etest.EngineResource("vllm-go-sdk", tc.name)
		engine := e2etest.NewSDKTracer(t, tc.opts)
		for i := range tc.count {
			spec := vllmRequest(time.Now().Add(-2 * time.Second))
			spec.Attributes = append(spec.Attributes, attribute.String("gen_ai.request.id", fmt.Sprintf("cmpl-%s-%d", tc.name, i)))
			engine.Send(t.Context(), "vllm.llm_engine", spec)
		}
		require.NoError(t, engine.FlushErr(t.Context()), tc.name)
		require.Equal(t, tc.count, engine.Exported(), "%s: spans the collector accepted", tc.name)
		want += tc.count
	}
	require.Eventually(t, func() bool { return promRequests(ports.Addr("prometheus")) == float64(want) },
		60*time.Second, 100*time.Millisecond, "the collector did not count the SDK's %d requests (got %v)",
		want, promRequests(ports.Addr("prometheus")))
}

// TestGoSDKRefusesInvalidUTF8 holds the reason TestBadModelNamesStayOnMetrics
// hand-builds its bytes: both Go SDK exporters refuse to encode a string
// attribute that is not UTF-8, so nothing reaches a real OTLP receiver.
func TestGoSDKRefusesInvalidUTF8(t *testing.T) {
	sink := e2etest.NewSink(t)
	for _, o := range []e2etest.SDKOptions{{Endpoint: sink.Endpoint}, {Endpoint: sink.HTTPEndpoint, HTTP: true}} {
		engine := e2etest.NewSDKTracer(t, o)
		spec := vllmRequest(time.Now().Add(-2 * time.Second))
		spec.Attributes = append(spec.Attributes, attribute.String("gen_ai.request.model", "llama\xff\xfe-8b"))
		engine.Send(t.Context(), "vllm.llm_engine", spec)
		require.ErrorContains(t, engine.FlushErr(t.Context()), "invalid UTF-8", "http=%v", o.HTTP)
		require.Zero(t, engine.Exported())
	}
	require.Zero(t, sink.Traces.SpanCount())
}
