// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/internal/e2etest"
)

var engineSeries = regexp.MustCompile(`(?m)^(vllm:[a-z_:]+(?:\{[^}]*\})?) (\S+)$`)

// engineRegistry serves vLLM's metric families with a real Prometheus
// client library, in the text format vLLM's prometheus_client writes. The
// real vLLM's are checked by make e2e-vllm (e2e/vllm/analyze.py).
type engineRegistry struct {
	kv          prometheus.Gauge
	preemptions prometheus.Counter
	ttft        prometheus.Observer
	addr        string
}

func serveEngineMetrics(t *testing.T) *engineRegistry {
	t.Helper()
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": "tiny", "engine": "0"}
	kv := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage", ConstLabels: labels})
	pre := prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:num_preemptions_total", Help: "preemptions", ConstLabels: labels})
	ttft := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "TTFT",
		ConstLabels: labels, Buckets: []float64{0.01, 0.1, 1}})
	reg.MustRegister(kv, pre, ttft)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &engineRegistry{kv: kv, preemptions: pre, ttft: ttft, addr: ln.Addr().String()}
}

// launchEngine runs `inferprof-run vllm serve tiny --port P` where vllm is
// a script that sleeps: inferprof-run starts it and writes its scrape
// target, naming the sleeping process as it names vLLM's API server. It
// returns the engine's pid and the target's labels once the file exists.
func launchEngine(t *testing.T, port, targets string) (pid int, labels map[string]string) {
	t.Helper()
	run := os.Getenv("INFERPROF_RUN_BIN")
	if run == "" {
		run = filepath.Join(filepath.Dir(e2etest.Binary(t)), "inferprof-run")
	}
	require.FileExists(t, run, "build bin/inferprof-run (make build) or set INFERPROF_RUN_BIN")
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "vllm"), []byte("#!/bin/sh\nexec sleep 600\n"), 0o755))
	cmd := exec.Command(run, "-no-hook", "-no-cupti", "--", "vllm", "serve", "/models/tiny",
		"--served-model-name", "tiny", "--port", port)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"INFERPROF_ENGINE_TARGETS_DIR="+targets, "OTEL_RESOURCE_ATTRIBUTES=", "OTEL_SERVICE_NAME=")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stopLauncher(cmd) })
	var groups []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var file string
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(targets, "*.json"))
		if len(files) != 1 {
			return false
		}
		file = files[0]
		b, err := os.ReadFile(file)
		return err == nil && json.Unmarshal(b, &groups) == nil && len(groups) == 1
	}, 30*time.Second, 20*time.Millisecond, "inferprof-run wrote no scrape target in %s", targets)
	assert.Equal(t, []string{"127.0.0.1:" + port}, groups[0].Targets)
	// The launcher supervises the engine: the target is named by, and
	// labelled with, the pid of its child, the process serving /metrics.
	pid, err := strconv.Atoi(groups[0].Labels["process_pid"])
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(targets, strconv.Itoa(pid)+".json"), file)
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	require.NoError(t, err, "the engine process is alive")
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	assert.Equal(t, strconv.Itoa(cmd.Process.Pid), fields[1], "the engine is inferprof-run's child")
	return pid, groups[0].Labels
}

// TestEngineMetricsScrapedWithTheEngineIdentity runs the shipped
// graphsignal.yaml (the local /signals and uploads) with an engine started
// through inferprof-run: its /metrics is found with no configuration,
// keeps vLLM's names, carries the identity inferprof-run gave the engine,
// moves when the engine's values move, and is uploaded under the names
// Graphsignal's own recorder gives these families (prometheus_client's
// family names: a counter without _total).
func TestEngineMetricsScrapedWithTheEngineIdentity(t *testing.T) {
	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	dataDir := t.TempDir()
	targets := filepath.Join(dataDir, "engines")
	env := append(defaultEnv(t, ports, dataDir), "INFERPROF_ENGINE_SCRAPE_INTERVAL=500ms",
		"GRAPHSIGNAL_API_KEY=e2e-key", "GRAPHSIGNAL_ENDPOINT="+srv.URL)
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("graphsignal.yaml")}, Env: env})

	eng := serveEngineMetrics(t)
	eng.kv.Set(0.25)
	eng.preemptions.Add(3)
	for _, v := range []float64{0.005, 0.05, 0.05, 0.5, 2} {
		eng.ttft.Observe(v)
	}
	_, port, _ := net.SplitHostPort(eng.addr)
	pid, labels := launchEngine(t, port, targets)
	host, err := os.Hostname()
	require.NoError(t, err)
	id := labels["instance"]
	require.NotEmpty(t, id, "the target names the service.instance.id the launcher gave the engine")

	// Prometheus: vLLM's names, the engine's identity as labels.
	ident := []string{`service_name="vllm"`, `service_instance_id="` + id + `"`,
		`host_name="` + host + `"`, `process_pid="` + strconv.Itoa(pid) + `"`}
	series := func(name string) (string, float64) {
		for _, m := range engineSeries.FindAllStringSubmatch(getText("http://"+ports.Addr("prometheus")+"/metrics"), -1) {
			if !strings.HasPrefix(m[1], name+"{") {
				continue
			}
			f, _ := strconv.ParseFloat(m[2], 64)
			return m[1], f
		}
		return "", -1
	}
	require.Eventually(t, func() bool { _, v := series("vllm:kv_cache_usage_perc"); return v == 0.25 },
		60*time.Second, 100*time.Millisecond, "the engine's KV-cache usage never reached Prometheus")
	lab, _ := series("vllm:kv_cache_usage_perc")
	for _, want := range ident {
		assert.Contains(t, lab, want)
	}
	eng.kv.Set(0.75)
	require.Eventually(t, func() bool { _, v := series("vllm:kv_cache_usage_perc"); return v == 0.75 },
		30*time.Second, 100*time.Millisecond, "KV-cache usage did not follow the engine")
	_, pre := series("vllm:num_preemptions_total")
	assert.Equal(t, 3.0, pre)
	_, count := series("vllm:time_to_first_token_seconds_count")
	assert.Equal(t, 5.0, count)
	assert.NotContains(t, getText("http://"+ports.Addr("prometheus")+"/metrics"), "_created{",
		"prometheus_client's start-time series are dropped")

	// /signals serves them in Graphsignal's shape.
	var doc signalsDoc
	require.Eventually(t, func() bool {
		var ok bool
		doc, ok = getSignals(t, ports.Addr("graphsignal_local"))
		return ok && signalsStat(doc, "vllm:time_to_first_token_seconds", "count") == 5
	}, 30*time.Second, 100*time.Millisecond, "/signals never served the engine's TTFT histogram")
	assert.Equal(t, 3.0, signalsStat(doc, "vllm:num_preemptions", "total"))
	assert.Equal(t, 0.75, signalsStat(doc, "vllm:kv_cache_usage_perc", "value"))
	for _, m := range doc.Metrics {
		if m.Name == "vllm:kv_cache_usage_perc" {
			assert.Equal(t, id, m.Tags["service.instance.id"])
			assert.Equal(t, strconv.Itoa(pid), m.Tags["process.pid"])
			assert.Equal(t, "tiny", m.Tags["inferprof.model.name"])
		}
	}

	// The dashboard: the engine's gauges over time, and, with no request
	// span sent (tracing off), its TTFT chart from the engine's histogram,
	// saying so.
	var dash struct {
		LatencySource map[string]string `json:"latency_source"`
		Latency       map[string][]struct {
			Count int64 `json:"count"`
		} `json:"latency"`
		Engines []struct {
			Instance     string       `json:"instance"`
			KVCacheUsage [][2]float64 `json:"kv_cache_usage"`
		} `json:"engines"`
	}
	var body string
	require.Eventually(t, func() bool {
		body = getText("http://" + ports.Addr("ui") + "/dashboard.json")
		dash.Engines = nil
		if json.Unmarshal([]byte(body), &dash) != nil || len(dash.Engines) != 1 {
			return false
		}
		kv := dash.Engines[0].KVCacheUsage
		return len(kv) > 0 && kv[len(kv)-1][1] == 0.75
	}, 30*time.Second, 100*time.Millisecond, "the dashboard never showed the engine's KV-cache usage: %s", body)
	assert.Equal(t, id, dash.Engines[0].Instance)
	assert.Equal(t, "engine_metrics", dash.LatencySource["ttft"])
	eng.ttft.Observe(0.05)
	require.Eventually(t, func() bool {
		body = getText("http://" + ports.Addr("ui") + "/dashboard.json")
		if json.Unmarshal([]byte(body), &dash) != nil {
			return false
		}
		n := int64(0)
		for _, p := range dash.Latency["ttft"] {
			n += p.Count
		}
		return n >= 1
	}, 30*time.Second, 100*time.Millisecond, "the TTFT chart never showed the engine's observation: %s", body)

	// Uploads: the names Graphsignal's prometheus recorder uses.
	require.Eventually(t, func() bool {
		up := uploadedNames(srv)
		return up["vllm:kv_cache_usage_perc"] && up["vllm:num_preemptions"] && up["vllm:time_to_first_token_seconds"]
	}, 60*time.Second, 100*time.Millisecond, "uploads lack the engine's metrics: %v", uploadedNames(srv))
	require.Empty(t, srv.Malformed())
}

func signalsStat(doc signalsDoc, name, stat string) float64 {
	sum, found := 0.0, false
	for _, m := range doc.Metrics {
		if m.Name == name {
			f, _ := m.Stats[stat].(float64)
			sum += f
			found = true
		}
	}
	if !found {
		return -1
	}
	return sum
}

func uploadedNames(srv *graphsignaltest.Server) map[string]bool {
	out := map[string]bool{}
	for _, u := range srv.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			out[m.Name] = true
		}
	}
	return out
}

func getText(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
