// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

var requestsTotal = regexp.MustCompile(`^inferprof_server_requests_total\{`)

// promRequests sums inferprof_server_requests_total over its series; -1
// when the scrape fails or has none. It fails no test: it also runs in a
// goroutine of its own.
func promRequests(addr string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	sum, found := 0.0, false
	for _, m := range promSeries.FindAllStringSubmatch(string(b), -1) {
		if requestsTotal.MatchString(m[1]) {
			f, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return -1
			}
			sum += f
			found = true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// signalsRequests sums the inferprof.server.requests totals on /signals.
func signalsRequests(t *testing.T, addr string) float64 {
	t.Helper()
	doc, ok := getSignals(t, addr)
	if !ok {
		return -1
	}
	sum := 0.0
	for _, m := range doc.Metrics {
		if m.Name == names.MetricRequests {
			f, _ := m.Stats["total"].(float64)
			sum += f
		}
	}
	return sum
}

// dashboardRequests is the dashboard's request total (/dashboard.json,
// what the page shows).
func dashboardRequests(addr string) float64 {
	resp, err := http.Get("http://" + addr + "/dashboard.json")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var doc struct {
		Totals struct {
			Requests int64 `json:"requests"`
		} `json:"totals"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return -1
	}
	return float64(doc.Totals.Requests)
}

// TestProcessesOfOneServiceAddUp runs the shipped default config and sends
// vLLM request spans from processes of one service.name that differ only in
// vllm.process_id, which the prometheus exporter's allow-list drops: two at
// once, then in turn, then a third as after a restart. Prometheus, /signals
// and the dashboard must count every request, and the Prometheus counter,
// scraped all along, must never go down. Before the connector keyed on the
// exported identity, 100 + 200 at once read 100, 64, 50, 100 and a restart
// dropped 200 to 13.
func TestProcessesOfOneServiceAddUp(t *testing.T) {
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_METRICS_FLUSH_INTERVAL=200ms"),
	})
	prom, local, ui := ports.Addr("prometheus"), ports.Addr("graphsignal_local"), ports.Addr("ui")

	// Scrape all along; every value read is kept.
	var mu sync.Mutex
	var seen []float64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v := promRequests(prom); v >= 0 {
					mu.Lock()
					seen = append(seen, v)
					mu.Unlock()
				}
			}
		}
	}()

	tracers := map[string]*e2etest.Tracer{}
	send := func(pid string, n int) {
		tr := tracers[pid]
		if tr == nil {
			tr = e2etest.NewTracer(t, ports.Addr("otlp_grpc"),
				attribute.String("service.name", "vllm"),
				attribute.String("vllm.instrumenting_module_name", "vllm.llm_engine"),
				attribute.String("vllm.process_id", pid))
			tracers[pid] = tr
		}
		start := time.Now().Add(-5 * time.Second)
		for i := range n {
			tr.Send(t.Context(), "vllm.llm_engine", vllmRequestTTFT(start, i, 0.1))
		}
		tr.Flush(t)
	}
	want := func(total float64, what string) {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			assert.Equal(ct, total, promRequests(prom), "%s: Prometheus", what)
			assert.Equal(ct, total, signalsRequests(t, local), "%s: /signals", what)
			assert.Equal(ct, total, dashboardRequests(ui), "%s: dashboard", what)
		}, 90*time.Second, 100*time.Millisecond, what)
	}

	// Make the tracers first, so the two processes then send at once.
	send("4101", 0)
	send("4202", 0)
	var wg sync.WaitGroup
	wg.Go(func() { send("4101", 100) })
	wg.Go(func() { send("4202", 200) })
	wg.Wait()
	want(300, "two processes at once")

	send("4101", 50)
	want(350, "the first process again")
	send("4202", 25)
	want(375, "the second process again")

	// A restart: a new process id, the old ones silent.
	send("4303", 13)
	want(388, "after a restart")
	// Several flushes later the figure still holds (no old series wins back).
	require.Never(t, func() bool { return promRequests(prom) != 388 }, time.Second, 50*time.Millisecond,
		"the requests counter moved after the last request")

	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	for i := 1; i < len(seen); i++ {
		require.GreaterOrEqualf(t, seen[i], seen[i-1], "the requests counter went back from %v to %v (scrape %d of %d)",
			seen[i-1], seen[i], i, len(seen))
	}
	assert.NotContains(t, fmt.Sprint(scrape(t, prom)), "process_id", "the pid became a label")
	c.Stop()
}
