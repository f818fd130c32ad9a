// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// crashingEngine logs in vLLM's format (vllm/logger.py _FORMAT, with
// NewLineFormatter's header on every line), logs the prompt at INFO as
// --enable-log-requests does, logs an exception whose text quotes it, then
// dies of an uncaught CUDA OOM that quotes it too.
const crashingEngine = `import logging, os, sys
class F(logging.Formatter):
    def format(self, r):
        m = super().format(r)
        parts = m.split(r.message)
        return m.replace("\n", "\r\n" + parts[0])
h = logging.StreamHandler(sys.stdout)
h.setFormatter(F("(APIServer pid=%(process)d) %(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"))
log = logging.getLogger("vllm"); log.addHandler(h); log.setLevel(logging.INFO)
log.info("Received request cmpl-1: prompt: 'PROMPT'")
try:
    raise ValueError("input 'PROMPT' was rejected")
except ValueError:
    log.exception("Error in preprocessing prompt inputs: PROMPT")
raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB while serving 'PROMPT'")
`

func launcherBin(t *testing.T) string {
	t.Helper()
	run := os.Getenv("INFERPROF_RUN_BIN")
	if run == "" {
		run = filepath.Join(filepath.Dir(e2etest.Binary(t)), "inferprof-run")
	}
	require.FileExists(t, run, "build bin/inferprof-run (make build) or set INFERPROF_RUN_BIN")
	return run
}

// TestLauncherEngineErrors: an engine that crashes under inferprof-run,
// through the shipped default config, shows as inferprof.engine.errors by
// kind on Prometheus and in /signals errors in Graphsignal's shape, with the
// engine's identity, and its prompt is nowhere: not in Prometheus, not in
// /signals, not in the collector's own output.
func TestLauncherEngineErrors(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	run := launcherBin(t)
	const prompt = "VERMILION-WALRUS-PROMPT-77"
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")},
		Env: defaultEnv(t, ports, t.TempDir())})

	script := filepath.Join(t.TempDir(), "engine.py")
	require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(crashingEngine, "PROMPT", prompt)), 0o600))
	cmd := exec.CommandContext(t.Context(), run, "-no-hook", "-no-cupti", "-service-name", "vllm-crash",
		"-logs-endpoint", ports.Addr("otlp_grpc"), "--", py, script)
	cmd.Env = append(os.Environ(), "OTEL_RESOURCE_ATTRIBUTES=inferprof.model.name=tiny-crash")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v\n%s", err, out)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, string(out), prompt, "the engine's own output passes unchanged")

	get := func(url string) string {
		resp, err := http.Get(url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	series := func(prom, kind string) bool {
		re := regexp.MustCompile(`(?m)^inferprof_engine_errors_total\{[^}]*inferprof_engine_error_kind="` + kind + `"[^}]*\} 1$`)
		return re.MatchString(prom)
	}
	var prom string
	require.Eventually(t, func() bool {
		prom = get("http://" + ports.Addr("prometheus") + "/metrics")
		return series(prom, "traceback") && series(prom, "cuda_oom") && series(prom, "exit")
	}, 60*time.Second, 100*time.Millisecond, "inferprof.engine.errors by kind never reached Prometheus:\n%s", prom)
	assert.Regexp(t, `inferprof_engine_errors_total\{[^}]*job="vllm-crash"`, prom, "the engine's service.name")
	assert.NotContains(t, prom, prompt)

	type signalsErrors struct {
		Errors []struct {
			Level     string            `json:"level"`
			Message   string            `json:"message"`
			Exception string            `json:"exception"`
			Tags      map[string]string `json:"tags"`
		} `json:"errors"`
	}
	var doc signalsErrors
	var body string
	require.Eventually(t, func() bool {
		body = get("http://" + ports.Addr("graphsignal_local") + "/signals")
		doc = signalsErrors{}
		return json.Unmarshal([]byte(body), &doc) == nil && len(doc.Errors) >= 3
	}, 60*time.Second, 100*time.Millisecond, "/signals errors: %s", body)
	assert.NotContains(t, body, prompt)
	byException := map[string]bool{}
	for _, e := range doc.Errors {
		assert.Equal(t, "ERROR", strings.ToUpper(e.Level), "%+v", e)
		assert.NotEmpty(t, e.Message)
		byException[e.Exception] = true
		assert.Contains(t, e.Tags, "inferprof.engine.error.kind", "%+v", e)
	}
	assert.True(t, byException["ValueError"], "the traceback's exception type: %s", body)
	assert.True(t, byException["RuntimeError"], "the OOM's exception type: %s", body)

	// The dashboard lists them, newest first, by kind.
	var dash struct {
		Errors []struct {
			Kind    string `json:"kind"`
			Service string `json:"service"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	require.Eventually(t, func() bool {
		body = get("http://" + ports.Addr("ui") + "/dashboard.json")
		return json.Unmarshal([]byte(body), &dash) == nil && len(dash.Errors) >= 3
	}, 60*time.Second, 100*time.Millisecond, "the dashboard's errors: %s", body)
	assert.NotContains(t, body, prompt)
	kinds := map[string]bool{}
	for _, e := range dash.Errors {
		kinds[e.Kind] = true
		assert.Equal(t, "vllm-crash", e.Service)
	}
	assert.True(t, kinds["traceback"] && kinds["cuda_oom"], "the dashboard's kinds: %v", kinds)

	// The shipped debug exporter (basic verbosity) logs a count per batch.
	require.Eventually(t, func() bool { return strings.Contains(c.Output(), `"log records": 3`) },
		30*time.Second, 100*time.Millisecond, "the three records never reached the debug exporter")
	assert.NotContains(t, c.Output(), prompt)
}
