// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// engineScript is a stand-in for `vllm serve`: the real opentelemetry-sdk
// reads OTEL_RESOURCE_ATTRIBUTES, as vLLM's tracing does, and sends one
// request span shaped as vLLM's (no model on it).
const engineScript = `import os, time
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.trace import SpanKind

tp = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=os.environ["E2E_OTLP"], insecure=True)))
start = time.time_ns() - 3_000_000_000
s = tp.get_tracer("vllm.llm_engine").start_span("llm_request", kind=SpanKind.SERVER, start_time=start, attributes={
    "gen_ai.request.id": "cmpl-launcher-0", "gen_ai.request.max_tokens": 128,
    "gen_ai.usage.prompt_tokens": 40, "gen_ai.usage.completion_tokens": 20,
    "gen_ai.latency.time_in_queue": 0.01, "gen_ai.latency.time_to_first_token": 0.1,
    "gen_ai.latency.e2e": 2.0, "gen_ai.latency.time_in_model_prefill": 0.08,
    "gen_ai.latency.time_in_model_decode": 1.8, "gen_ai.latency.time_in_model_inference": 1.88,
    "gen_ai.response.finish_reasons": '["stop"]'})
s.end(end_time=start + 2_000_000_000)
tp.shutdown()
`

// enginePython is a Python with opentelemetry-sdk and its OTLP gRPC
// exporter: the pinned SDK venv (e2e/otelpy, which make test passes as
// INFERPROF_OTEL_PYTHON), else python3 or a venv that make e2e-vllm built.
func enginePython(t *testing.T) string {
	t.Helper()
	check := "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.grpc"
	cands := []string{"python3"}
	if p := os.Getenv("INFERPROF_OTEL_PYTHON"); p != "" {
		cands = append([]string{p}, cands...)
	}
	home, _ := os.UserHomeDir()
	venvs, _ := filepath.Glob(filepath.Join(home, ".cache", "inferprof", "vllm-*", "bin", "python"))
	for _, c := range append(cands, venvs...) {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "-c", check).Run() == nil {
			return p
		}
	}
	t.Skip("no Python with opentelemetry-sdk and opentelemetry-exporter-otlp-proto-grpc (python3, or make e2e-vllm's venv)")
	return ""
}

// TestLauncherNamesModelOnVLLMRequests: an engine started as
// `inferprof-run vllm serve MODEL --served-model-name NAME` sends request
// spans without a model; inferprof-run puts inferprof.model.name=NAME on
// its OTEL_RESOURCE_ATTRIBUTES, and the shipped config's Prometheus series
// and /signals carry the model.
func TestLauncherNamesModelOnVLLMRequests(t *testing.T) {
	py := enginePython(t)
	run := os.Getenv("INFERPROF_RUN_BIN")
	if run == "" {
		run = filepath.Join(filepath.Dir(e2etest.Binary(t)), "inferprof-run")
	}
	require.FileExists(t, run, "build bin/inferprof-run (make build) or set INFERPROF_RUN_BIN")

	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")},
		Env: append(defaultEnv(t, ports, dataDir), "INFERPROF_METRICS_FLUSH_INTERVAL=200ms")})

	bin := t.TempDir()
	script := filepath.Join(bin, "vllm")
	require.NoError(t, os.WriteFile(script, []byte("#!"+py+"\n"+engineScript), 0o755))
	cmd := exec.CommandContext(t.Context(), run, "--", "vllm", "serve", "Qwen/Qwen3-0.6B", "--served-model-name", "qwen-e2e")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"E2E_OTLP="+ports.Addr("otlp_grpc"), "OTEL_RESOURCE_ATTRIBUTES=",
		"INFERPROF_ENGINE_TARGETS_DIR="+filepath.Join(dataDir, "engines"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "engine under inferprof-run:\n%s", out)
	assert.Contains(t, string(out), "inferprof.model.name", "inferprof-run says what it set")

	get := func(url string) string {
		resp, err := http.Get(url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	require.Eventually(t, func() bool {
		return strings.Contains(get("http://"+ports.Addr("prometheus")+"/metrics"), `gen_ai_request_model="qwen-e2e"`)
	}, 60*time.Second, 100*time.Millisecond, "no Prometheus series with the served model")
	require.Eventually(t, func() bool {
		return strings.Contains(get("http://"+ports.Addr("graphsignal_local")+"/signals"), `"qwen-e2e"`)
	}, 60*time.Second, 100*time.Millisecond, "/signals never named the served model")
	require.Eventually(t, func() bool {
		return strings.Contains(get("http://"+ports.Addr("ui")+"/dashboard.json"), `"qwen-e2e"`)
	}, 60*time.Second, 100*time.Millisecond, "/dashboard.json never named the served model")
}
