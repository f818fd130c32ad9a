// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// mergeAppend makes a second --config append to the first's service lists
// (extensions, pipeline receivers and exporters) instead of replacing them.
const mergeAppend = "--feature-gates=confmap.enableMergeAppendOption"

// hostEngine is e2e/testdata/fake_vllm.py running with a command line that
// reads like vLLM's: vLLM-shaped /metrics on its --port, and a second TCP
// port that counts the connections it gets.
type hostEngine struct {
	cmd    *exec.Cmd
	port   int
	stderr string // inferprof-run's stderr, when it started the engine
}

type hostEngineState struct {
	SidePort        int `json:"side_port"`
	SideConnections int `json:"side_connections"`
	Scrapes         int `json:"scrapes"`
}

func (e *hostEngine) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(e.port) + path
}

func (e *hostEngine) state(t *testing.T) (hostEngineState, bool) {
	t.Helper()
	var s hostEngineState
	resp, err := http.Get(e.url("/fake/state"))
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s) == nil && s.SidePort != 0
}

func (e *hostEngine) setKV(t *testing.T, v float64) {
	t.Helper()
	resp, err := http.Get(e.url("/fake/set?kv=" + strconv.FormatFloat(v, 'f', -1, 64)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// fakeVLLMScript copies the fake engine into a fresh folder as an executable
// named vllm, so its command line reads "python3 <dir>/vllm serve ...".
func fakeVLLMScript(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	src, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "e2e", "testdata", "fake_vllm.py"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vllm"), src, 0o755))
	return filepath.Join(dir, "vllm")
}

func waitServing(t *testing.T, e *hostEngine) hostEngineState {
	t.Helper()
	var s hostEngineState
	require.Eventually(t, func() bool {
		var ok bool
		s, ok = e.state(t)
		return ok
	}, 30*time.Second, 20*time.Millisecond, "the fake engine never served on port %d", e.port)
	return s
}

// startFakeVLLM runs `python3 <dir>/vllm serve tiny --port P` directly: an
// engine inferprof-run did not start.
func startFakeVLLM(t *testing.T) *hostEngine {
	t.Helper()
	e := &hostEngine{port: e2etest.FreePort(t)}
	e.cmd = exec.Command("python3", fakeVLLMScript(t), "serve", "tiny", "--port", strconv.Itoa(e.port))
	require.NoError(t, e.cmd.Start())
	t.Cleanup(func() { _ = e.cmd.Process.Kill(); _ = e.cmd.Wait() })
	waitServing(t, e)
	return e
}

// discoveryEnv is defaultEnv with the overlay's refresh and the scrape at
// half a second.
func discoveryEnv(t *testing.T, ports *e2etest.Ports, dataDir string) []string {
	t.Helper()
	return append(defaultEnv(t, ports, dataDir),
		"INFERPROF_ENGINE_SCRAPE_INTERVAL=500ms", "INFERPROF_ENGINE_DISCOVERY_INTERVAL=500ms")
}

// engineSeriesOf returns the label sets and values of one vllm:* family on
// the Prometheus exporter, keyed by label set.
func engineSeriesOf(promAddr, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range engineSeries.FindAllStringSubmatch(getText("http://"+promAddr+"/metrics"), -1) {
		if strings.HasPrefix(m[1], name+"{") {
			f, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = f
		}
	}
	return out
}

// withLabel keeps the series whose label set holds label.
func withLabel(series map[string]float64, label string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range series {
		if strings.Contains(k, label) {
			out[k] = v
		}
	}
	return out
}

// TestEngineDiscoveredOnTheHost runs config/default.yaml with the
// config/engine-discovery.yaml overlay and an engine started by hand: the
// host observer finds its API port from its command line, a prometheus
// receiver scrapes it under vLLM's names with the identity the endpoint
// gives, nothing touches the engine's other port, and the receiver stops
// when the engine exits.
func TestEngineDiscoveredOnTheHost(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	col := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml"), shippedConfig("engine-discovery.yaml")},
		Args:        []string{mergeAppend},
		Env:         discoveryEnv(t, ports, dataDir),
	})
	eng := startFakeVLLM(t)
	pid := strconv.Itoa(eng.cmd.Process.Pid)
	host, err := os.Hostname()
	require.NoError(t, err)
	prom := ports.Addr("prometheus")
	mine := `process_pid="` + pid + `"`

	require.Eventually(t, func() bool {
		for _, v := range withLabel(engineSeriesOf(prom, "vllm:kv_cache_usage_perc"), mine) {
			return v == 0.25
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "the discovered engine's KV-cache usage never reached Prometheus")
	kv := withLabel(engineSeriesOf(prom, "vllm:kv_cache_usage_perc"), mine)
	require.Len(t, kv, 1, "one engine, one series: %v", kv)
	for lab := range kv {
		for _, want := range []string{`service_name="vllm"`, `host_name="` + host + `"`,
			`service_instance_id="127.0.0.1:` + strconv.Itoa(eng.port) + `"`, `model_name="tiny"`, `engine="0"`} {
			assert.Contains(t, lab, want)
		}
	}
	assert.Equal(t, []float64{3}, values(withLabel(engineSeriesOf(prom, "vllm:num_preemptions_total"), mine)))
	assert.Equal(t, []float64{2}, values(withLabel(engineSeriesOf(prom, "vllm:num_requests_running"), mine)))
	assert.NotContains(t, getText("http://"+prom+"/metrics"), "_created{", "start-time series are dropped")

	eng.setKV(t, 0.75)
	require.Eventually(t, func() bool {
		return assert.ObjectsAreEqual([]float64{0.75}, values(withLabel(engineSeriesOf(prom, "vllm:kv_cache_usage_perc"), mine)))
	}, 30*time.Second, 100*time.Millisecond, "KV-cache usage did not follow the engine")

	// The same exporters as the launcher's path: /signals and the dashboard.
	instance := "127.0.0.1:" + strconv.Itoa(eng.port)
	require.Eventually(t, func() bool {
		doc, ok := getSignals(t, ports.Addr("graphsignal_local"))
		for _, m := range doc.Metrics {
			if ok && m.Name == "vllm:kv_cache_usage_perc" && m.Tags["service.instance.id"] == instance &&
				m.Tags["process.pid"] == pid && m.Stats["value"] == 0.75 {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "/signals never served the discovered engine's KV-cache usage")
	var dash struct {
		Engines []struct {
			Instance     string       `json:"instance"`
			KVCacheUsage [][2]float64 `json:"kv_cache_usage"`
		} `json:"engines"`
	}
	require.Eventually(t, func() bool {
		dash.Engines = nil
		if json.Unmarshal([]byte(getText("http://"+ports.Addr("ui")+"/dashboard.json")), &dash) != nil {
			return false
		}
		for _, e := range dash.Engines {
			if n := len(e.KVCacheUsage); e.Instance == instance && n > 0 && e.KVCacheUsage[n-1][1] == 0.75 {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the dashboard never showed the discovered engine's KV-cache usage")

	// Several scrapes later, the engine's other port has had no connection,
	// and one receiver was started for this engine: its API port's.
	require.Eventually(t, func() bool { s, ok := eng.state(t); return ok && s.Scrapes >= 3 },
		30*time.Second, 100*time.Millisecond)
	s, ok := eng.state(t)
	require.True(t, ok)
	assert.Zero(t, s.SideConnections, "the engine's second port (%d) was connected to", s.SidePort)
	started := startedFor(col.Output(), pid)
	require.Len(t, started, 1, "receivers started for the engine's pid: %v", started)
	assert.Contains(t, started[0], "127.0.0.1-"+strconv.Itoa(eng.port)+"-TCP-"+pid)

	// The engine exits: the observer removes the endpoint and the receiver stops.
	require.NoError(t, eng.cmd.Process.Signal(syscall.SIGTERM))
	_ = eng.cmd.Wait()
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(col.Output(), "\n") {
			if strings.Contains(line, "stopping receiver") && strings.Contains(line, "-TCP-"+pid) {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the receiver did not stop when the engine exited")
}

// TestEngineFromInferprofRunWithDiscoveryScrapedTwice shows what the overlay
// does to an engine inferprof-run started: the engine's command line, the
// only thing the observer sees, does not say who started it, so the engine is
// scraped through its file_sd target (the launcher's service.instance.id)
// and through the observer (its address): two copies of each series. The
// docs say to load the overlay only where engines are not started by
// inferprof-run.
func TestEngineFromInferprofRunWithDiscoveryScrapedTwice(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml"), shippedConfig("engine-discovery.yaml")},
		Args:        []string{mergeAppend},
		Env:         discoveryEnv(t, ports, dataDir),
	})
	eng := launchFakeVLLM(t, ports, dataDir)

	// The engine is inferprof-run's child, named by its target file.
	var pid string
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(dataDir, "engines", "*.json"))
		if len(files) != 1 {
			return false
		}
		pid = strings.TrimSuffix(filepath.Base(files[0]), ".json")
		return true
	}, 30*time.Second, 20*time.Millisecond, "inferprof-run wrote no scrape target")

	prom := ports.Addr("prometheus")
	observed := `service_instance_id="127.0.0.1:` + strconv.Itoa(eng.port) + `"`
	var kv map[string]float64
	require.Eventually(t, func() bool {
		kv = withLabel(engineSeriesOf(prom, "vllm:kv_cache_usage_perc"), `process_pid="`+pid+`"`)
		return len(kv) == 2 && len(withLabel(kv, observed)) == 1
	}, 60*time.Second, 100*time.Millisecond, "expected the engine's series once from the launcher's target and once from the observer: %v", kv)
	// The copy from the launcher's target carries the launcher's identity;
	// both hold the engine's value.
	for lab, v := range kv {
		assert.Equal(t, 0.25, v, lab)
		assert.Contains(t, lab, `service_name="vllm"`)
		if !strings.Contains(lab, observed) {
			assert.Regexp(t, `service_instance_id="[0-9a-f-]{36}"`, lab, "the launcher's service.instance.id")
		}
	}
	// The launcher saw the overlay on the collector's command line and said so.
	stderr, err := os.ReadFile(eng.stderr)
	require.NoError(t, err)
	assert.Contains(t, string(stderr), "runs the collector overlay engine-discovery.yaml")
}

// launchFakeVLLM runs `inferprof-run [flags] -- vllm serve tiny --port P`
// with the fake engine first on PATH as vllm.
func launchFakeVLLM(t *testing.T, ports *e2etest.Ports, dataDir string, flags ...string) *hostEngine {
	t.Helper()
	run := os.Getenv("INFERPROF_RUN_BIN")
	if run == "" {
		run = filepath.Join(filepath.Dir(e2etest.Binary(t)), "inferprof-run")
	}
	require.FileExists(t, run, "build bin/inferprof-run (make build) or set INFERPROF_RUN_BIN")
	script := fakeVLLMScript(t)
	eng := &hostEngine{port: e2etest.FreePort(t)}
	args := append([]string{"-no-hook", "-no-cupti", "-logs-endpoint", ports.Addr("otlp_grpc")}, flags...)
	eng.cmd = exec.Command(run, append(args, "--", "vllm", "serve", "tiny", "--port", strconv.Itoa(eng.port))...)
	eng.cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(script)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"INFERPROF_ENGINE_TARGETS_DIR="+filepath.Join(dataDir, "engines"), "OTEL_RESOURCE_ATTRIBUTES=", "OTEL_SERVICE_NAME=")
	eng.stderr = filepath.Join(t.TempDir(), "inferprof-run.stderr")
	f, err := os.Create(eng.stderr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	eng.cmd.Stderr = f
	require.NoError(t, eng.cmd.Start())
	t.Cleanup(func() { stopLauncher(eng.cmd) })
	waitServing(t, eng)
	return eng
}

// TestEngineFromInferprofRunNoEngineMetricsWithDiscoveryScrapedOnce: the
// remedy the docs give on a host with both kinds of engine. With
// -no-engine-metrics the launcher writes no target, and the observer alone
// scrapes the engine: one copy of each series, the observer's identity.
func TestEngineFromInferprofRunNoEngineMetricsWithDiscoveryScrapedOnce(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml"), shippedConfig("engine-discovery.yaml")},
		Args:        []string{mergeAppend},
		Env:         discoveryEnv(t, ports, dataDir),
	})
	eng := launchFakeVLLM(t, ports, dataDir, "-no-engine-metrics")
	prom := ports.Addr("prometheus")
	observed := `service_instance_id="127.0.0.1:` + strconv.Itoa(eng.port) + `"`
	var pid string
	require.Eventually(t, func() bool {
		for lab := range withLabel(engineSeriesOf(prom, "vllm:kv_cache_usage_perc"), observed) {
			i := strings.Index(lab, `process_pid="`)
			if i >= 0 {
				pid = strings.SplitN(lab[i:], `"`, 3)[1]
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "the observer never scraped the launched engine")
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	require.NoError(t, err, "the series' process.pid is a live process")
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	assert.Equal(t, strconv.Itoa(eng.cmd.Process.Pid), fields[1], "the scraped process is inferprof-run's child")

	// Several scrapes later there is still one copy, and no target file.
	first, ok := eng.state(t)
	require.True(t, ok)
	require.Eventually(t, func() bool { s, ok := eng.state(t); return ok && s.Scrapes >= first.Scrapes+3 },
		30*time.Second, 100*time.Millisecond)
	assert.Len(t, withLabel(engineSeriesOf(prom, "vllm:kv_cache_usage_perc"), `process_pid="`+pid+`"`), 1)
	files, _ := filepath.Glob(filepath.Join(dataDir, "engines", "*.json"))
	assert.Empty(t, files, "-no-engine-metrics writes no target")
	stderr, err := os.ReadFile(eng.stderr)
	require.NoError(t, err)
	assert.NotContains(t, string(stderr), "engine-discovery.yaml", "no target, no double scrape, no warning")
}

// startedFor returns the receiver_creator "starting receiver" log lines for
// the endpoints of one pid.
func startedFor(output, pid string) []string {
	var out []string
	for _, line := range strings.Split(output, "\n") {
		if strings.Contains(line, "starting receiver") && strings.Contains(line, "-TCP-"+pid) {
			out = append(out, line)
		}
	}
	return out
}

func values(series map[string]float64) []float64 {
	out := make([]float64, 0, len(series))
	for _, v := range series {
		out = append(out, v)
	}
	return out
}

// TestEngineDiscoveryNeedsTheMergeGate: without
// confmap.enableMergeAppendOption the overlay's service lists replace the
// base config's (its one extension for default.yaml's three), and the
// collector refuses to start rather than run without the file_sd path.
func TestEngineDiscoveryNeedsTheMergeGate(t *testing.T) {
	ports := e2etest.NewPorts(t)
	col := e2etest.Launch(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml"), shippedConfig("engine-discovery.yaml")},
		Env:         discoveryEnv(t, ports, t.TempDir()),
	})
	assert.NotZero(t, col.Wait(60*time.Second), "the collector ran with the overlay and no merge gate")
	assert.Contains(t, col.Output(), `failed to resolve middleware "request_guard"`)
}

// TestEngineDiscoveryOverlayOnEveryBase: the one overlay fits each shipped
// config that scrapes engines: the merged config validates, keeps the base's
// extensions and its metrics/engines pipeline (the launcher's receiver, its
// processors and exporters), and adds the observer and the discovered
// engines to them.
func TestEngineDiscoveryOverlayOnEveryBase(t *testing.T) {
	for _, base := range []string{"default.yaml", "graphsignal.yaml", "agent.yaml"} {
		t.Run(base, func(t *testing.T) {
			args := []string{mergeAppend, "--config", shippedConfig(base), "--config", shippedConfig("engine-discovery.yaml")}
			env := append(os.Environ(), "K8S_NODE_NAME=node-1", "GRAPHSIGNAL_API_KEY=e2e-key")
			cmd := exec.Command(e2etest.Binary(t), append([]string{"validate"}, args...)...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)

			cmd = exec.Command(e2etest.Binary(t), append([]string{"print-config"}, args...)...)
			cmd.Env = env
			out, err = cmd.Output()
			require.NoError(t, err)
			var merged, alone map[string]any
			require.NoError(t, yaml.Unmarshal(out, &merged))
			b, err := os.ReadFile(shippedConfig(base))
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(b, &alone))
			wantExt := append(getList(alone, "service", "extensions"), "host_observer")
			assert.Equal(t, wantExt, getList(merged, "service", "extensions"))
			pipe := []string{"service", "pipelines", "metrics/engines"}
			assert.Equal(t, append(getList(alone, append(pipe, "receivers")...), "forward/engine_discovery"),
				getList(merged, append(pipe, "receivers")...))
			for _, k := range []string{"processors", "exporters"} {
				assert.Equal(t, getList(alone, append(pipe, k)...), getList(merged, append(pipe, k)...), k)
			}
		})
	}
}

// stopLauncher ends inferprof-run with SIGTERM, which it forwards to the
// engine: the engine runs in a process group of its own, so a SIGKILL of the
// launcher would leave it running, and every later discovery test would find
// it. SIGKILL after 10 s if the launcher is still there.
func stopLauncher(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
