// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// promScrape is the scrape interval of the test's Prometheus, and so the
// "Scrape interval" of the Grafana data source the substitution assumes.
const promScrape = time.Second

// promClient bounds every call to Prometheus: a stuck one fails the poll
// that made it rather than the whole test run.
var promClient = &http.Client{Timeout: 5 * time.Second}

// prometheusBinary finds Debian's prometheus. CI installs it (.ci/run) and
// sets CI=true, where a missing binary fails the test; elsewhere it skips.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is not installed: apt-get install -y --no-install-recommends prometheus (.ci/run does)")
		}
		t.Skip("prometheus is not installed (apt-get install prometheus); CI installs it and fails without it")
	}
	return bin
}

// startPrometheus runs a real Prometheus on listen, with its own data
// folder, scraping target every promScrape with native histograms on
// (2.x: --enable-feature=native-histograms, which also makes it ask for
// the protobuf exposition). It stops with the test.
func startPrometheus(t *testing.T, bin, target, listen string) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: inferprof
    static_configs:
      - targets: [%[2]q]
`, promScrape, target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--enable-feature=native-histograms",
		"--log.level=warn")
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	require.Eventuallyf(t, func() bool {
		var r promResult
		return promGet(t, listen, "/api/v1/query", url.Values{"query": {`up{job="inferprof"} == 1`}}, &r) && len(r.Data.Result) == 1
	}, 30*time.Second, 100*time.Millisecond, "prometheus never scraped the collector\n%s", readFile(t, logPath))
}

// promResult is the part of Prometheus's HTTP API answer the test reads.
type promResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric     map[string]string `json:"metric"`
			Value      []any             `json:"value"`
			Values     [][]any           `json:"values"`
			Histogram  []any             `json:"histogram"`
			Histograms [][]any           `json:"histograms"`
		} `json:"result"`
	} `json:"data"`
}

// promGet calls Prometheus's HTTP API; false when it does not answer
// "success".
func promGet(t *testing.T, addr, path string, q url.Values, v *promResult) bool {
	t.Helper()
	resp, err := promClient.Get("http://" + addr + path + "?" + q.Encode())
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v) == nil && v.Status == "success"
}

// finite reports whether a sample holds a number a panel draws: NaN (a
// quantile of a rate of nothing) and ±Inf show as no value in Grafana.
func finite(sample []any) bool {
	if len(sample) != 2 {
		return false
	}
	s, _ := sample[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// moved reports whether a sample is a finite number other than 0: the
// test's traffic moves every series a panel reads, so a panel that only
// ever draws 0 reads a series that did not move (a defect, or the wrong
// series).
func moved(sample []any) bool {
	if !finite(sample) {
		return false
	}
	f, _ := strconv.ParseFloat(sample[1].(string), 64)
	return f != 0
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// grafanaRegexValue is what Grafana writes for a multi-value variable set
// to All (no custom all value) in a =~ matcher: each value regex-escaped,
// with the backslashes doubled for the PromQL string, one alone as itself,
// several as (a|b).
func grafanaRegexValue(vals []string) string {
	esc := make([]string, len(vals))
	for i, v := range vals {
		esc[i] = strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
	}
	if len(esc) == 1 {
		return esc[0]
	}
	return "(" + strings.Join(esc, "|") + ")"
}

// grafanaSubstitute replaces a dashboard's variables as Grafana does for a
// time series panel over [start, end] with the data source's scrape
// interval promScrape: $__interval is the step, range/max data points
// floored at the scrape interval (here the scrape interval: the range is a
// test's); $__rate_interval is max($__interval + scrape, 4 × scrape);
// $__range the range; a template variable its resolved value.
func grafanaSubstitute(expr string, vars map[string]string, step, rng time.Duration) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		name := grafanaVar.FindStringSubmatch(m)[1]
		switch name {
		case "__interval":
			return step.String()
		case "__rate_interval":
			return max(step+promScrape, 4*promScrape).String()
		case "__range":
			return fmt.Sprintf("%ds", int(rng.Seconds()))
		}
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// zeroOnly lists the panels that draw only 0 after this test's load, with
// why. Each must still return finite series (its names and labels are
// right); it fails once it moves, so that it leaves this list. None is
// listed now: the cupti panels moved once the receiver's deltas stopped
// resetting after an idle flush (receiver/cuptireceiver/README.md).
var zeroOnly = map[string]string{}

// TestGrafanaPanelsOnRealPrometheus runs Debian's Prometheus against the
// built collector's prometheus exporter (config/default.yaml), sends two
// rounds of traffic (vLLM request spans and engine steps, cupti kernel
// records, NVML-shaped GPU readings: a rate needs a counter to move between
// scrapes, and a new series has no earlier sample), and evaluates every
// panel's PromQL through /api/v1/query_range, the way Grafana draws a
// time series panel, with the variables set to All. Each expression must
// return a number a panel draws, and every series must carry the labels
// its legendFormat names. Every panel has a source the test feeds; those
// that draw only 0 are listed in zeroOnly with the reason.
func TestGrafanaPanelsOnRealPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	files, err := filepath.Glob(filepath.Join(e2etest.RepoRoot(), "dashboards", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 3, "GenAI serving overview, GPU and kernels, engine steps")

	c, ports, sockDir := startShipped(t)
	prom := ports.Addr("prometheus_server")
	startPrometheus(t, bin, ports.Addr("prometheus"), prom)
	begin := time.Now().Add(-promScrape)

	tr := feedTraffic(t, ports, sockDir)
	waitForTraffic(t, c, ports.Addr("ui"), tr)
	total, _, _ := tr.counts()
	// Both rounds' requests must be in Prometheus before the panels are read:
	// the first round gives each series its first sample, the second moves it.
	sumOf := func(expr string) float64 {
		var r promResult
		if !promGet(t, prom, "/api/v1/query", url.Values{"query": {expr}}, &r) || len(r.Data.Result) != 1 {
			return math.NaN()
		}
		s, _ := r.Data.Result[0].Value[1].(string)
		f, _ := strconv.ParseFloat(s, 64)
		return f
	}
	requestsIn := func(n int) func() bool {
		return func() bool { return sumOf("sum(inferprof_server_requests_total)") == float64(n) }
	}
	var launches, kernelSeconds float64
	for _, k := range tr.kernels {
		launches += float64(k.n)
		kernelSeconds += float64(k.n) * float64(k.dur) / 1e9
	}
	require.Eventually(t, func() bool { return sumOf("sum(inferprof_gpu_kernel_count_total)") == launches },
		30*time.Second, 100*time.Millisecond, "prometheus never held the first round's kernels")
	require.Eventually(t, requestsIn(total), 30*time.Second, 100*time.Millisecond, "prometheus never held the first round\n%s", c.Output())
	// One more scrape of the first round's values for every source, then
	// the second round.
	seen := time.Now().Add(2 * promScrape)
	require.Eventually(t, func() bool { return time.Now().After(seen) }, 10*time.Second, 50*time.Millisecond)
	feedTraffic(t, ports, sockDir)
	// Each fake engine run is a new service.instance.id (vm/<pid>/0), so
	// new series: a run of 5 ms steps ends before its series' second
	// scrape. One of 150 ms steps (31 steps, about 5 s) spans several
	// flushes and scrapes, as a serving engine does.
	runFakeEngine(t, filepath.Join(sockDir, "step.sock"), tr.service, "--engine", "vllm", "--step-ms", "150")
	require.Eventually(t, requestsIn(2*total), 30*time.Second, 100*time.Millisecond, "prometheus never held the second round\n%s", c.Output())

	// Once the dashboard (its own sums) holds both rounds' kernels,
	// Prometheus must hold them too: each cupti delta starts at its series'
	// last end, so the exporter adds it instead of resetting the counter.
	require.Eventually(t, func() bool {
		var d dashboardDoc
		if !getJSON(t, "http://"+ports.Addr("ui")+"/dashboard.json", &d) {
			return false
		}
		var secs float64
		for _, k := range d.Kernels.Top {
			secs += k.Seconds
		}
		return secs >= 2*kernelSeconds-1e-9
	}, 30*time.Second, 100*time.Millisecond, "the dashboard never showed the second round's kernels")
	var held float64
	if !assert.Eventually(t, func() bool {
		held = sumOf("sum(inferprof_gpu_kernel_count_total)")
		return held == 2*launches
	}, 30*time.Second, 100*time.Millisecond) {
		t.Fatalf("%v launches sent in two rounds; prometheus holds %v", 2*launches, held)
	}

	// Debian's Prometheus 2.42 ingests the connector's exponential
	// histograms as native histograms (docs/dashboard.md).
	var h promResult
	require.True(t, promGet(t, prom, "/api/v1/query", url.Values{"query": {"sum(inferprof_exponential_server_time_to_first_token_seconds)"}}, &h))
	require.Len(t, h.Data.Result, 1, "a native histogram series")
	require.NotEmpty(t, h.Data.Result[0].Histogram, "the exponential histogram arrives as a native histogram, not as floats")

	type failure struct{ where, expr, why string }
	evaluate := func() (fails []failure, n int) {
		end := time.Now().Add(2 * promScrape)
		step := promScrape
		rng := end.Sub(begin)
		for _, f := range files {
			qs := dashboardQueries(t, f)
			vars := map[string]string{}
			// Variables first, in the dashboard's order (one may use another).
			for _, q := range qs {
				if !q.variable {
					continue
				}
				n++
				name := strings.TrimSpace(strings.SplitN(q.where, "variable", 2)[1])
				m := labelValues.FindStringSubmatch(q.expr)
				if m == nil {
					fails = append(fails, failure{q.where, q.expr, "not a label_values(selector, label) query"})
					continue
				}
				sel := grafanaSubstitute(m[1], vars, step, rng)
				var raw struct {
					Status string              `json:"status"`
					Error  string              `json:"error"`
					Data   []map[string]string `json:"data"`
				}
				resp, err := promClient.Get("http://" + prom + "/api/v1/series?" + url.Values{"match[]": {sel},
					"start": {strconv.FormatInt(begin.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}.Encode())
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&raw)
					resp.Body.Close()
				}
				if err != nil || raw.Status != "success" {
					fails = append(fails, failure{q.where, sel, fmt.Sprintf("series query failed: %v %s", err, raw.Error)})
					continue
				}
				vals := map[string]bool{}
				for _, s := range raw.Data {
					if v := s[m[2]]; v != "" {
						vals[v] = true
					}
				}
				if len(vals) == 0 {
					fails = append(fails, failure{q.where, sel, "no value for " + m[2]})
					vars[name] = "$^"
					continue
				}
				vars[name] = grafanaRegexValue(slices.Sorted(maps.Keys(vals)))
			}
			for _, q := range qs {
				if q.variable {
					continue
				}
				n++
				expr := grafanaSubstitute(q.expr, vars, step, rng)
				var r promResult
				if !promGet(t, prom, "/api/v1/query_range", url.Values{"query": {expr},
					"start": {strconv.FormatInt(begin.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
					"step": {strconv.Itoa(int(step.Seconds()))}}, &r) {
					fails = append(fails, failure{q.where, expr, "query failed: " + r.Error})
					continue
				}
				drawn := false
				for _, s := range r.Data.Result {
					drawn = drawn || len(s.Histograms) > 0 || slices.ContainsFunc(s.Values, moved)
				}
				why, listed := zeroOnly[q.where]
				switch {
				case listed && drawn:
					fails = append(fails, failure{q.where, expr, "moves now: take it off zeroOnly (" + why + ")"})
					continue
				case listed && len(r.Data.Result) == 0:
					fails = append(fails, failure{q.where, expr, "no series at all, though listed as drawing 0 only"})
					continue
				case !listed && !drawn:
					fails = append(fails, failure{q.where, expr, fmt.Sprintf("no number but 0 to draw (%d series)", len(r.Data.Result))})
					continue
				}
				for _, l := range legendLabel.FindAllStringSubmatch(q.legend, -1) {
					for _, s := range r.Data.Result {
						if s.Metric[l[1]] == "" {
							fails = append(fails, failure{q.where, expr, fmt.Sprintf("legend %q: a series without %s: %v", q.legend, l[1], s.Metric)})
							break
						}
					}
				}
			}
		}
		return fails, n
	}
	// Each source reaches the scrape on its own flush: poll until every
	// panel draws, then report what still does not.
	var fails []failure
	var n int
	ok := assert.Eventually(t, func() bool {
		fails, n = evaluate()
		return len(fails) == 0
	}, 20*time.Second, 500*time.Millisecond)
	for _, f := range fails {
		t.Errorf("%s: %s\n  %s", f.where, f.why, f.expr)
	}
	if ok {
		t.Logf("%d expressions and variables drew data in Prometheus", n)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
