// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package requestguardextension

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

var guardID = component.MustNewID("request_guard")

func startGuard(t *testing.T, cfg *Config) (map[component.ID]component.Component, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := extension.Settings{ID: guardID, TelemetrySettings: tel.NewTelemetrySettings()}
	ext, err := NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return map[component.ID]component.Component{guardID: ext}, tel
}

// deepRequest is a span attribute of arrays nested n deep.
func deepRequest(n int) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("llm_request")
	v := span.Attributes().PutEmpty("deep")
	for range n {
		v = v.SetEmptySlice().AppendEmpty()
	}
	v.SetStr("leaf")
	return ptraceotlp.NewExportRequestFromTraces(td)
}

func serveHTTP(t *testing.T, exts map[component.ID]component.Component) (string, chan []byte) {
	t.Helper()
	got := make(chan []byte, 10)
	sc := confighttp.NewDefaultServerConfig()
	sc.NetAddr.Endpoint = "127.0.0.1:0"
	sc.Middlewares = []configmiddleware.Config{{ID: guardID}}
	ln, err := sc.ToListener(context.Background())
	require.NoError(t, err)
	srv, err := sc.ToServer(context.Background(), exts, componenttest.NewNopTelemetrySettings(),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			got <- b
		}))
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), got
}

func post(t *testing.T, url, host, contentType string, body []byte) (int, string) {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(body)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	req, err := http.NewRequest(http.MethodPost, url+"/v1/traces", &gz)
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Content-Encoding", "gzip")
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHTTPRefusesDeepBodiesAndForeignHosts(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxDepth = 32
	exts, tel := startGuard(t, cfg)
	url, got := serveHTTP(t, exts)

	deep := deepRequest(40)
	pb, err := deep.MarshalProto()
	require.NoError(t, err)
	js, err := deep.MarshalJSON()
	require.NoError(t, err)
	code, body := post(t, url, "", "application/x-protobuf", pb)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "max_depth")
	code, body = post(t, url, "", "application/json", js)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, `"code":3`)

	// A shallow body reaches the handler whole, decompressed.
	ok := deepRequest(3)
	pb, err = ok.MarshalProto()
	require.NoError(t, err)
	code, _ = post(t, url, "", "application/x-protobuf", pb)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, pb, <-got)

	code, _ = post(t, url, "evil.example", "application/x-protobuf", pb)
	require.Equal(t, http.StatusForbidden, code)
	for _, h := range []string{"localhost:4318", "127.0.0.1", "[::1]:4318", "app.localhost"} {
		code, _ = post(t, url, h, "application/x-protobuf", pb)
		require.Equal(t, http.StatusOK, code, h)
		<-got
	}
	require.Empty(t, got)
	require.Equal(t, int64(2), sum(t, tel, "otelcol_request_guard_deep_requests"))
	require.Equal(t, int64(1), sum(t, tel, "otelcol_request_guard_foreign_host_requests"))
}

func TestAllowedHosts(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AllowedHosts = []string{"inferprof.example"}
	exts, _ := startGuard(t, cfg)
	url, got := serveHTTP(t, exts)
	pb, err := deepRequest(0).MarshalProto()
	require.NoError(t, err)
	code, _ := post(t, url, "inferprof.example:4318", "application/x-protobuf", pb)
	require.Equal(t, http.StatusOK, code)
	<-got
	code, _ = post(t, url, "other.example", "application/x-protobuf", pb)
	require.Equal(t, http.StatusForbidden, code)
}

type traceSink struct {
	ptraceotlp.UnimplementedGRPCServer
	got chan int
}

func (s *traceSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.got <- req.Traces().SpanCount()
	return ptraceotlp.NewExportResponse(), nil
}

func TestGRPCRefusesDeepMessagesAsInvalidArgument(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxDepth = 32
	exts, tel := startGuard(t, cfg)
	sc := configgrpc.NewDefaultServerConfig()
	sc.Middlewares = []configmiddleware.Config{{ID: guardID}}
	srv, err := sc.ToServer(context.Background(), exts, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	sink := &traceSink{got: make(chan int, 10)}
	ptraceotlp.RegisterGRPCServer(srv, sink)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := ptraceotlp.NewGRPCClient(conn)

	_, err = client.Export(context.Background(), deepRequest(40))
	require.Equal(t, codes.InvalidArgument, status.Code(err), err)
	require.Contains(t, status.Convert(err).Message(), "max_depth")
	require.Empty(t, sink.got, "a refused request never reaches the receiver")

	_, err = client.Export(context.Background(), deepRequest(3))
	require.NoError(t, err)
	require.Equal(t, 1, <-sink.got)
	require.Equal(t, int64(1), sum(t, tel, "otelcol_request_guard_deep_requests"))
}

func sum(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	require.NoError(t, err, name)
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a sum", name)
	var n int64
	for _, dp := range s.DataPoints {
		n += dp.Value
	}
	return n
}
