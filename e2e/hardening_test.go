// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// deepBody is the OTLP traces request that overflowed pdata's stack: one
// span attribute whose value is an array nested n deep. It is written as
// wire bytes in one pass (pdata's own marshaller recurses as its decoder
// does): sizes innermost first, then prefixes outermost first.
func deepBody(n int) []byte {
	leaf := []byte{0x0a, 0x01, 'x'} // AnyValue{string_value: "x"}
	sizes := make([]int, 2*n+1)
	sizes[0] = len(leaf)
	for i := 1; i < len(sizes); i++ {
		sizes[i] = 1 + uvarintLen(sizes[i-1]) + sizes[i-1]
	}
	value := sizes[len(sizes)-1]
	kv := 3 + 1 + uvarintLen(value) + value
	span := 1 + uvarintLen(kv) + kv
	ss := 1 + uvarintLen(span) + span
	rs := 1 + uvarintLen(ss) + ss
	out := make([]byte, 0, rs+8)
	out = lenPrefix(out, 1, rs)   // ExportTraceServiceRequest.resource_spans
	out = lenPrefix(out, 2, ss)   // ResourceSpans.scope_spans
	out = lenPrefix(out, 2, span) // ScopeSpans.spans
	out = lenPrefix(out, 9, kv)   // Span.attributes
	out = append(out, 0x0a, 0x01, 'k')
	out = lenPrefix(out, 2, value) // KeyValue.value
	for i := len(sizes) - 2; i >= 0; i-- {
		field := byte(1) // ArrayValue.values
		if (len(sizes)-2-i)%2 == 0 {
			field = 5 // AnyValue.array_value
		}
		out = lenPrefix(out, field, sizes[i])
	}
	return append(out, leaf...)
}

func lenPrefix(out []byte, field byte, size int) []byte {
	out = append(out, field<<3|2)
	for size >= 0x80 {
		out = append(out, byte(size)|0x80)
		size >>= 7
	}
	return append(out, byte(size))
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func postGuarded(t *testing.T, addr, host, contentType string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader(gzipped(t, body)))
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

// rawCodec sends a message's bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

func healthy(t *testing.T, addr string) bool {
	resp, err := http.Get("http://" + addr + "/") //nolint:noctx // loopback test helper
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestDeepBodyIsRefusedAndTheCollectorStaysUp sends the body that ended the
// collector with a stack overflow (1.3 million levels, OTLP/HTTP protobuf,
// gzip), its JSON form at 700 thousand levels, and a deep gRPC message, on
// the shipped default config: each is refused and counted, and a normal
// request afterwards still arrives.
func TestDeepBodyIsRefusedAndTheCollectorStaysUp(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	c := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: defaultEnv(t, ports, dataDir)})

	deep := deepBody(1_300_000)
	code, body := postGuarded(t, ports.Addr("otlp_http"), "", "application/x-protobuf", deep)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "max_depth")
	require.False(t, c.Exited(), "the collector died on the deep body:\n%s", c.Output())

	js := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[{"key":"k","value":` +
		strings.Repeat(`{"arrayValue":{"values":[`, 700_000))
	code, body = postGuarded(t, ports.Addr("otlp_http"), "", "application/json", js)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "max_depth")

	conn, err := grpc.NewClient(ports.Addr("otlp_grpc"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	var resp []byte
	err = conn.Invoke(t.Context(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", deepBody(100_000), &resp,
		grpc.ForceCodecV2(rawCodec{}))
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)

	require.True(t, healthy(t, ports.Addr("health")))
	require.Eventually(t, func() bool {
		v, _ := promValue(ports.Port("telemetry"), "otelcol_request_guard_deep_requests")
		return v == 3
	}, 30*time.Second, 100*time.Millisecond)

	// Other data is unaffected: a normal span reaches the traces file.
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"))
	tracer.Send(t.Context(), "vllm.llm_engine", vllmRequest(time.Now().Add(-2*time.Second)))
	tracer.Flush(t)
	path := filepath.Join(dataDir, "inferprof-traces.jsonl")
	require.Eventually(t, func() bool {
		_, _, ok := findSpan(readTraces(t, path), "llm_request")
		return ok
	}, 30*time.Second, 100*time.Millisecond)
}

// TestForeignHostIsRefused is what a DNS rebinding page does: a request to
// 127.0.0.1 whose Host is the attacker's name. Every HTTP listener of the
// shipped default config answers it 403, and a loopback name 200.
func TestForeignHostIsRefused(t *testing.T) {
	ports := e2etest.NewPorts(t)
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: defaultEnv(t, ports, t.TempDir())})

	get := func(addr, path, host string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, http.NoBody)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	local, ui := ports.Addr("graphsignal_local"), ports.Addr("ui")
	for _, tc := range []struct{ addr, path string }{
		{local, "/signals"}, {ui, "/dashboard.json"}, {ui, "/timeline?last=60s"}, {ui, "/"},
		{ports.Addr("prometheus"), "/metrics"},
	} {
		assert.Equal(t, http.StatusForbidden, get(tc.addr, tc.path, "evil.example"), tc.path)
		assert.Equal(t, http.StatusForbidden, get(tc.addr, tc.path, "evil.example:"+strings.Split(tc.addr, ":")[1]), tc.path)
		assert.Equal(t, http.StatusOK, get(tc.addr, tc.path, "localhost:"+strings.Split(tc.addr, ":")[1]), tc.path)
		assert.Equal(t, http.StatusOK, get(tc.addr, tc.path, tc.addr), tc.path)
	}

	// OTLP JSON with a forged Host: no SDK sends either.
	req := ptraceotlp.NewExportRequestFromTraces(ptrace.NewTraces())
	js, err := req.MarshalJSON()
	require.NoError(t, err)
	code, _ := postGuarded(t, ports.Addr("otlp_http"), "evil.example", "application/json", js)
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = postGuarded(t, ports.Addr("otlp_http"), "", "application/json", js)
	assert.Equal(t, http.StatusOK, code)
	// request_guard counts what it refused: 4 paths x 2 names on the
	// graphsignal and inferprof_ui listeners (their own check stands
	// behind, for configs without the guard), 2 on Prometheus, 1 on OTLP.
	require.Eventually(t, func() bool {
		v, _ := promValue(ports.Port("telemetry"), "otelcol_request_guard_foreign_host_requests")
		return v == 11
	}, 30*time.Second, 100*time.Millisecond)
}

// TestSlowClientsAreCutOff trickles 2,000 OTLP/HTTP requests, a byte at a
// time, on loopback. Health and both OTLP protocols keep answering, and
// every trickling connection is closed by the collector once read_timeout
// has passed (shortened here from the shipped 30 s with --set).
func TestSlowClientsAreCutOff(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         defaultEnv(t, ports, dataDir),
		Args: []string{
			"--set=receivers::otlp::protocols::http::read_timeout=2s",
			"--set=receivers::otlp::protocols::http::read_header_timeout=1s",
		},
	})
	const slow = 2000
	conns := make([]net.Conn, 0, slow)
	for range slow {
		c, err := net.Dial("tcp", ports.Addr("otlp_http"))
		require.NoError(t, err)
		conns = append(conns, c)
		t.Cleanup(func() { _ = c.Close() })
		_, err = fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000000\r\n\r\n")
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	closed := make(chan struct{}, slow)
	for _, c := range conns {
		wg.Go(func() {
			// Trickle until the collector closes the connection.
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			go func() {
				_, _ = io.Copy(io.Discard, c)
				closed <- struct{}{}
			}()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					if _, err := c.Write([]byte{0x0a}); err != nil {
						return
					}
				}
			}
		})
	}
	// Meanwhile, health and OTLP answer.
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"))
	// A bare probe of the HTTP listener (an empty export, which no SDK sends)
	// beside the SDK's gRPC client.
	empty, err := ptraceotlp.NewExportRequestFromTraces(ptrace.NewTraces()).MarshalProto()
	require.NoError(t, err)
	for range 5 {
		require.True(t, healthy(t, ports.Addr("health")))
		code, body := postGuarded(t, ports.Addr("otlp_http"), "", "application/x-protobuf", empty)
		require.Equal(t, http.StatusOK, code, body)
		tracer.Send(t.Context(), "vllm.llm_engine", vllmRequest(time.Now().Add(-2*time.Second)))
		tracer.Flush(t)
	}
	deadline := time.After(60 * time.Second)
	for n := 0; n < slow; n++ {
		select {
		case <-closed:
		case <-deadline:
			t.Fatalf("%d of %d trickling connections still open after 60 s", slow-n, slow)
		}
	}
	cancel()
	wg.Wait()
	require.True(t, healthy(t, ports.Addr("health")))
}

// TestShippedListenersAreGuarded reads every shipped config: each HTTP and
// gRPC listener names request_guard, and OTLP/HTTP has its timeouts and
// body limit.
func TestShippedListenersAreGuarded(t *testing.T) {
	for _, name := range []string{"default.yaml", "agent.yaml", "gateway.yaml", "graphsignal.yaml"} {
		b, err := os.ReadFile(shippedConfig(name))
		require.NoError(t, err)
		s := string(b)
		require.Contains(t, s, "  request_guard:", name)
		require.Contains(t, s, "extensions: [request_guard", name)
		for _, listener := range []string{"INFERPROF_OTLP_GRPC_ENDPOINT", "INFERPROF_PROMETHEUS_ENDPOINT"} {
			i := strings.Index(s, listener)
			if i < 0 && listener == "INFERPROF_PROMETHEUS_ENDPOINT" {
				continue // the agent exports to the gateway, no Prometheus
			}
			require.GreaterOrEqual(t, i, 0, "%s: %s", name, listener)
			require.Contains(t, s[i:i+200], "middlewares: [{id: request_guard}]", "%s: %s", name, listener)
		}
		if i := strings.Index(s, "INFERPROF_OTLP_HTTP_ENDPOINT"); i >= 0 {
			for _, key := range []string{"middlewares: [{id: request_guard}]", "read_header_timeout:", "read_timeout:", "max_request_body_size:"} {
				require.Contains(t, s[i:i+500], key, "%s: otlp http", name)
			}
		}
	}
}

// badModelSpan is a vLLM request span whose model is not UTF-8, or 10 MB.
// Hand-built: the Go SDK's protobuf encoding refuses a string that is not
// UTF-8 (TestGoSDKRefusesInvalidUTF8), so no SDK of ours could send it.
func badModelSpans(models ...string) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i, model := range models {
		sp := vllmRequest(time.Now().Add(-2 * time.Second))
		s := spans.AppendEmpty()
		s.SetName(sp.Name)
		s.SetKind(ptrace.SpanKindServer)
		s.SetTraceID([16]byte{byte(i + 1), 1})
		s.SetSpanID([8]byte{byte(i + 1), 2})
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(sp.Start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(sp.End))
		for _, kv := range sp.Attributes {
			s.Attributes().PutEmpty(string(kv.Key)).FromRaw(kv.Value.AsInterface()) //nolint:errcheck // scalar values
		}
		s.Attributes().PutStr("gen_ai.request.model", model)
	}
	b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	return b
}

// TestBadModelNamesStayOnMetrics sends a model name that is not UTF-8 and
// one of 10 MB: both series appear on /metrics, sanitised, the scrape stays
// small, and the changes are counted.
func TestBadModelNamesStayOnMetrics(t *testing.T) {
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_METRICS_FLUSH_INTERVAL=1s"),
	})
	huge := strings.Repeat("m", 10<<20)
	code, body := postGuarded(t, ports.Addr("otlp_http"), "", "application/x-protobuf", badModelSpans("llama\xff\xfe-8b", huge))
	require.Equal(t, http.StatusOK, code, body)

	var page string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ports.Addr("prometheus") + "/metrics") //nolint:noctx // loopback
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
		return strings.Contains(page, `gen_ai_request_model="llama\uFFFD\uFFFD-8b"`) || strings.Contains(page, "llama\uFFFD\uFFFD-8b")
	}, 30*time.Second, 200*time.Millisecond)
	require.Contains(t, page, `gen_ai_request_model="`+strings.Repeat("m", 256)+`"`)
	require.Less(t, len(page), 1<<20, "a scrape carries the cut model name, not 10 MB")
	require.NotContains(t, c.Output(), "invalid UTF-8")
	v, _ := promValue(ports.Port("telemetry"), "otelcol_connector_inference_metrics_sanitized_labels")
	require.GreaterOrEqual(t, v, 2.0)
}

// TestDataFilesAreOwnerOnly starts the shipped configs on a data folder
// that does not exist yet: every folder the collector creates is 0700, the
// data folder that holds the traces file included, and file_storage's
// queue folder (file_storage, which starts first, made both 0750).
func TestDataFilesAreOwnerOnly(t *testing.T) {
	for _, cfg := range []string{"default.yaml", "graphsignal.yaml"} {
		t.Run(cfg, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			base := t.TempDir()
			require.NoError(t, os.Chmod(base, 0o700))
			dataDir := filepath.Join(base, "data")
			env := defaultEnv(t, ports, dataDir)
			for i, e := range env {
				if strings.HasPrefix(e, "INFERPROF_CUPTI_ENDPOINT=") || strings.HasPrefix(e, "INFERPROF_STEP_ENDPOINT=") {
					env[i] = strings.Replace(e, dataDir, filepath.Join(base, "sock"), 1)
				}
			}
			e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig(cfg)}, Env: env})
			tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"))
			tracer.Send(t.Context(), "vllm.llm_engine", vllmRequest(time.Now().Add(-2*time.Second)))
			tracer.Flush(t)
			path := filepath.Join(dataDir, "inferprof-traces.jsonl")
			require.Eventually(t, func() bool {
				_, _, ok := findSpan(readTraces(t, path), "llm_request")
				return ok
			}, 30*time.Second, 100*time.Millisecond)
			// The file exporter sets the file's mode to 0644 itself; the
			// folder is what keeps it from other users.
			fi, err := os.Stat(dataDir)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "data folder")
			if fi, err := os.Stat(filepath.Join(dataDir, "inferprof-queue")); err == nil {
				assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "queue folder")
			}
		})
	}
}

// TestCuptiIdleClientsDoNotLockOutTheLibrary fills the cupti socket's 256
// places with clients that send a hello and then nothing: they are closed
// after idle_timeout (1 s here, 30 s shipped), counted, and a library
// connecting afterwards is accepted and its records counted.
func TestCuptiIdleClientsDoNotLockOutTheLibrary(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         defaultEnv(t, ports, dataDir),
		Args:        []string{"--set=receivers::cupti::idle_timeout=1s"},
	})
	sock := filepath.Join(dataDir, "cupti.sock")
	const idle = 256
	for i := range idle {
		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = c.Write(cuptiwire.AppendHello(nil, uint32(20000+i), 0, "squatter"))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		v, _ := promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_idle_connections")
		return v == idle
	}, 60*time.Second, 100*time.Millisecond)

	lib, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer lib.Close()
	b := cuptiwire.AppendHello(nil, 4242, uint64(time.Now().UnixNano()), "e2e-host")
	b = cuptiwire.AppendString(b, 1, "ampere_sgemm_128x64_tn")
	b = cuptiwire.AppendRecords(b, kernelRecs(1, 10, 1000))
	_, err = lib.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, _ := promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_records")
		return v >= 10
	}, 30*time.Second, 100*time.Millisecond)
	v, _ := promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_connections_rejected")
	require.Zero(t, v)
}
