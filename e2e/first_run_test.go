// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestMissingDataDirIsCreated starts the shipped default config with
// INFERPROF_DATA_DIR pointing at a folder that does not exist yet. The
// file exporter used to stop startup with "migrating legacy backups: ...
// no such file or directory"; now the folder is made, owner-only, and
// request spans land in it.
func TestMissingDataDirIsCreated(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := filepath.Join(t.TempDir(), "not", "yet")
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         defaultEnv(t, ports, dataDir),
	})
	info, err := os.Stat(dataDir)
	require.NoError(t, err, "INFERPROF_DATA_DIR was not created")
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "vllm"))
	tracer.Send(t.Context(), "vllm.llm_engine", vllmRequest(time.Now().Add(-2*time.Second)))
	tracer.Flush(t)
	path := filepath.Join(dataDir, "inferprof-traces.jsonl")
	require.Eventually(t, func() bool {
		_, _, ok := findSpan(readTraces(t, path), "llm_request")
		return ok
	}, 30*time.Second, 100*time.Millisecond, "llm_request never reached %s", path)
	c.Stop()
}

// promSeries matches one sample line of the Prometheus text format: the
// series (name and labels) and its value.
var promSeries = regexp.MustCompile(`(?m)^((?:gen_ai|inferprof)_[a-z_]+(?:\{[^}]*\})?) (\S+)$`)

// scrape returns every gen_ai_* and inferprof_* series on /metrics with its value.
func scrape(t *testing.T, addr string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range promSeries.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestRestartAddsNoSeries sends vLLM request spans from two processes of one
// server, as a restart does: the same service.name, a new vllm.process_id
// (vLLM puts the pid on its tracer's resource, vllm/tracing/otel.py
// init_tracer @40eeb0c5). With the shipped prometheus exporter's allow-list,
// the pid is no label, so the second process adds no series, and the
// connector, keyed on the same list, adds its requests to the first's.
func TestRestartAddsNoSeries(t *testing.T) {
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_METRICS_FLUSH_INTERVAL=200ms"),
	})
	requests := regexp.MustCompile(`^inferprof_server_requests_total\{`)
	countOf := func(series map[string]string) string {
		for k, v := range series {
			if requests.MatchString(k) {
				return v
			}
		}
		return ""
	}
	send := func(pid string, n int) {
		tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"),
			attribute.String("service.name", "vllm"),
			attribute.String("vllm.instrumenting_module_name", "vllm.llm_engine"),
			attribute.String("vllm.process_id", pid))
		start := time.Now().Add(-5 * time.Second)
		for i := range n {
			tracer.Send(t.Context(), "vllm.llm_engine", vllmRequestTTFT(start, i, 0.1))
		}
		tracer.Flush(t)
	}

	// waitCount scrapes until the requests counter reads want, and returns
	// that scrape.
	waitCount := func(want, msg string) map[string]string {
		var series map[string]string
		require.Eventually(t, func() bool {
			series = scrape(t, ports.Addr("prometheus"))
			return countOf(series) == want
		}, 90*time.Second, 100*time.Millisecond, msg)
		return series
	}
	send("4101", 2)
	before := waitCount("2", "the first process's requests never reached /metrics")
	send("4202", 1)
	after := waitCount("3", "the second process's request was not added to the first's")
	// No series of the old process wins a later flush back (five flushes
	// at 200ms).
	require.Never(t, func() bool {
		return countOf(scrape(t, ports.Addr("prometheus"))) != "3"
	}, time.Second, 50*time.Millisecond, "the requests counter flapped back to the old process's value")

	keys := func(m map[string]string) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	assert.Equal(t, keys(before), keys(after), "a new vllm.process_id added or changed series")
	for _, k := range keys(after) {
		assert.NotContains(t, k, "process_id", "the pid became a label")
		assert.NotContains(t, k, "instrumenting_module", "a volatile resource attribute became a label")
	}
	assert.True(t, strings.Contains(fmt.Sprint(keys(after)), `service_name="vllm"`), "allow-listed service.name is a label")
	c.Stop()
}
