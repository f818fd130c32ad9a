// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// defaultEnv moves every address of config/default.yaml to a free loopback
// port and its files to a temporary folder, so tests run side by side.
func defaultEnv(t testing.TB, ports *e2etest.Ports, dataDir string) []string {
	t.Helper()
	// The sockets live in dataDir, and the receivers refuse a socket folder
	// that is not owner-only (t.TempDir makes it 0755).
	if err := os.Chmod(dataDir, 0o700); !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	return []string{
		"INFERPROF_OTLP_GRPC_ENDPOINT=" + ports.Addr("otlp_grpc"),
		"INFERPROF_OTLP_HTTP_ENDPOINT=" + ports.Addr("otlp_http"),
		"INFERPROF_HEALTH_ENDPOINT=" + ports.Addr("health"),
		"INFERPROF_PROMETHEUS_ENDPOINT=" + ports.Addr("prometheus"),
		fmt.Sprintf("INFERPROF_TELEMETRY_PORT=%d", ports.Port("telemetry")),
		"INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT=" + ports.Addr("graphsignal_local"),
		"INFERPROF_UI_ENDPOINT=" + ports.Addr("ui"),
		"INFERPROF_DATA_DIR=" + dataDir,
		"INFERPROF_ENGINE_TARGETS_DIR=" + filepath.Join(dataDir, "engines"),
		"INFERPROF_CUPTI_ENDPOINT=" + filepath.Join(dataDir, "cupti.sock"),
		"INFERPROF_STEP_ENDPOINT=" + filepath.Join(dataDir, "step.sock"),
		"GRAPHSIGNAL_API_KEY=",
	}
}

func shippedConfig(name string) string {
	return filepath.Join(e2etest.RepoRoot(), "config", name)
}

// vllmRequest is a span shaped the way vLLM's OpenTelemetry tracing writes
// llm_request (vllm/tracing.py SpanAttributes), timestamps included.
func vllmRequest(start time.Time) e2etest.SpanSpec {
	return e2etest.SpanSpec{
		Name:  "llm_request",
		Kind:  trace.SpanKindServer,
		Start: start,
		End:   start.Add(1500 * time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.String("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct"),
			attribute.String("gen_ai.request.id", "cmpl-e2e-0"),
			attribute.Float64("gen_ai.request.temperature", 0.7),
			attribute.Float64("gen_ai.request.top_p", 0.95),
			attribute.Int("gen_ai.request.max_tokens", 128),
			attribute.Int("gen_ai.request.n", 1),
			attribute.Int("gen_ai.usage.prompt_tokens", 42),
			attribute.Int("gen_ai.usage.completion_tokens", 17),
			attribute.Float64("gen_ai.latency.time_in_queue", 0.05),
			attribute.Float64("gen_ai.latency.time_to_first_token", 0.2),
			attribute.Float64("gen_ai.latency.e2e", 1.5),
			attribute.Float64("gen_ai.latency.time_in_scheduler", 0.01),
			attribute.Float64("gen_ai.latency.time_in_model_forward", 1.1),
			attribute.Float64("gen_ai.latency.time_in_model_execute", 1.2),
			attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.14),
			attribute.Float64("gen_ai.latency.time_in_model_decode", 1.25),
			attribute.Float64("gen_ai.latency.time_in_model_inference", 1.39),
		},
	}
}

// readTraces reads the OTLP JSON lines the file exporter wrote.
func readTraces(t *testing.T, path string) []ptrace.Traces {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []ptrace.Traces
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 64<<20)
	var u ptrace.JSONUnmarshaler
	for s.Scan() {
		td, err := u.UnmarshalTraces(s.Bytes())
		require.NoError(t, err)
		out = append(out, td)
	}
	return out
}

func findSpan(batches []ptrace.Traces, name string) (ptrace.Span, pcommon.Resource, bool) {
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					if spans.At(k).Name() == name {
						return spans.At(k), rs.Resource(), true
					}
				}
			}
		}
	}
	return ptrace.Span{}, pcommon.Resource{}, false
}

// TestDefaultConfigPassesRequestSpan sends a vLLM llm_request span through
// the shipped default pipelines and checks that it comes out with its ids,
// timestamps and every attribute vLLM wrote.
func TestDefaultConfigPassesRequestSpan(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         defaultEnv(t, ports, dataDir),
	})

	resp, err := http.Get("http://" + ports.Addr("health") + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "health check")

	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "vllm"))
	sent := vllmRequest(time.Now().Add(-2 * time.Second).Truncate(time.Microsecond))
	sc := tracer.Send(t.Context(), "vllm.llm_engine", sent)
	tracer.Flush(t)

	path := filepath.Join(dataDir, "inferprof-traces.jsonl")
	var got ptrace.Span
	var res pcommon.Resource
	require.Eventually(t, func() bool {
		var ok bool
		got, res, ok = findSpan(readTraces(t, path), "llm_request")
		return ok
	}, 30*time.Second, 100*time.Millisecond, "llm_request span never reached %s", path)

	assert.Equal(t, sc.TraceID().String(), got.TraceID().String())
	assert.Equal(t, sc.SpanID().String(), got.SpanID().String())
	assert.Equal(t, sent.Start.UnixNano(), got.StartTimestamp().AsTime().UnixNano())
	assert.Equal(t, sent.End.UnixNano(), got.EndTimestamp().AsTime().UnixNano())
	svc, _ := res.Attributes().Get("service.name")
	assert.Equal(t, "vllm", svc.Str())
	for _, kv := range sent.Attributes {
		v, ok := got.Attributes().Get(string(kv.Key))
		if !assert.Truef(t, ok, "attribute %s lost", kv.Key) {
			continue
		}
		assert.Equalf(t, kv.Value.Emit(), v.AsString(), "attribute %s changed", kv.Key)
	}
	c.Stop()
}

// TestBadConfigFailsBeforeListening checks that a wrong key is named in the
// error and the collector exits non-zero without opening its ports.
func TestBadConfigFailsBeforeListening(t *testing.T) {
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
        no_such_key: 1
exporters:
  debug: {}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
`)
	c := e2etest.Launch(t, e2etest.Options{Config: cfg})
	code := c.Wait(2 * time.Minute) // a loaded machine can be slow to start the binary
	assert.NotEqual(t, 0, code)
	assert.Contains(t, c.Output(), "no_such_key")
	_, err := net.DialTimeout("tcp", ports.Addr("otlp"), time.Second)
	assert.Error(t, err, "a port was opened for a config that failed")
}

// TestPortInUseIsReported holds the OTLP port open and checks the collector
// says which address it could not bind.
func TestPortInUseIsReported(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	busy := l.Addr().String()
	ports := e2etest.NewPorts(t)
	env := defaultEnv(t, ports, t.TempDir())
	env = append(env, "INFERPROF_OTLP_GRPC_ENDPOINT="+busy)
	c := e2etest.Launch(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: env})
	code := c.Wait(60 * time.Second)
	assert.NotEqual(t, 0, code)
	out := c.Output()
	assert.Contains(t, out, busy)
	assert.True(t, strings.Contains(out, "address already in use"), "no clear bind error in:\n%s", out)
}

// TestOwnListenerInUseNamesVariable: when the address of one of our own
// listeners is taken, the collector's error names the address and the
// variable that moves it (stock listeners' errors cannot: their message is
// theirs; docs/troubleshooting.md lists those).
func TestOwnListenerInUseNamesVariable(t *testing.T) {
	for _, tc := range []struct {
		env  string
		hold func(t *testing.T, dataDir string, ports *e2etest.Ports) string
	}{
		{"INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT", func(t *testing.T, _ string, _ *e2etest.Ports) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return l.Addr().String()
		}},
		{"INFERPROF_UI_ENDPOINT", func(t *testing.T, _ string, _ *e2etest.Ports) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return l.Addr().String()
		}},
		{"INFERPROF_CUPTI_ENDPOINT", func(t *testing.T, dataDir string, _ *e2etest.Ports) string {
			path := filepath.Join(dataDir, "busy-cupti.sock")
			l, err := net.Listen("unix", path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return path
		}},
		{"INFERPROF_STEP_ENDPOINT", func(t *testing.T, dataDir string, _ *e2etest.Ports) string {
			path := filepath.Join(dataDir, "busy-step.sock")
			c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			return path
		}},
	} {
		t.Run(tc.env, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			dataDir := t.TempDir()
			env := defaultEnv(t, ports, dataDir)
			busy := tc.hold(t, dataDir, ports)
			c := e2etest.Launch(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")},
				Env: append(env, tc.env+"="+busy)})
			assert.NotEqual(t, 0, c.Wait(60*time.Second))
			out := c.Output()
			assert.Contains(t, out, busy)
			assert.Contains(t, out, "("+tc.env+" in the shipped configs; docs/troubleshooting.md)")
		})
	}
}
