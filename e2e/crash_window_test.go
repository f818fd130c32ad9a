// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestSIGKILLLossCounted runs the shipped graphsignal config with the
// backend down, sends request spans, kills the collector (SIGKILL) in the
// middle of a connector window and restarts it on the same data folder. The
// spans of that window are lost (issue #30 item 5); the restart counts
// them in otelcol_connector_inference_metrics_lost_on_restart_spans, and
// the count equals the loss measured apart from the connector's marker:
// spans the receiver accepted minus inferprof_server_requests_total, what
// the flushes before the kill had delivered. It is within one window of
// the load (docs/reliability.md).
func TestSIGKILLLossCounted(t *testing.T) {
	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	srv.SetResponder(func(*graphsignaltest.Upload) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	data := t.TempDir()
	env := append(defaultEnv(t, ports, data), "GRAPHSIGNAL_API_KEY=e2e-key", "GRAPHSIGNAL_ENDPOINT="+srv.URL)
	opts := e2etest.Options{ConfigFiles: []string{shippedConfig("graphsignal.yaml")}, Env: env}
	c := e2etest.Start(t, opts)
	otlp, tel := ports.Addr("otlp_http"), ports.Port("telemetry")
	const interval = 5 * time.Second // config/graphsignal.yaml's metrics_flush_interval

	// Load: 100-span batches every 20 ms at most (5,000 spans/s; 2,100/s
	// under -race on this machine), each batch's acceptance time kept for
	// the bound.
	eng := newEngines(t, otlp)
	var sent []time.Time
	start := time.Now()
	burst := func(batches int) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range batches {
			eng.send("vllm", 100, func(int) string { return "llama" })
			sent = append(sent, time.Now())
			<-tick.C
		}
	}

	// Kill once the marker in storage holds exactly the open window's spans:
	// every accepted span not yet delivered, after a window was delivered. A burst that a flush cut in two
	// is followed by another (bounded: 20 bursts of 1 s).
	var lost, window float64
	for attempt := 0; attempt < 20 && lost == 0; attempt++ {
		burst(50)
		accepted := float64(len(sent) * 100)
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			w, _ := promValue(tel, "otelcol_connector_inference_metrics_window_spans")
			delivered := promSum(t, ports.Port("prometheus"), "inferprof_server_requests_total", "")
			// delivered > 0: a flushed window before the kill, which the
			// restart must not count.
			if w > 0 && delivered > 0 && w == accepted-delivered {
				c.Kill()
				lost, window = accepted-delivered, w
				break
			}
		}
	}
	require.Positive(t, lost, "the marker never matched the open window")
	killed := time.Now()

	// The bound: what was accepted in the last window before the kill.
	inWindow := 0
	for _, at := range sent {
		if killed.Sub(at) <= interval+time.Second {
			inWindow += 100
		}
	}

	c2 := e2etest.Start(t, opts)
	var counted float64
	require.Eventually(t, func() bool {
		v, ok := promValue(tel, "otelcol_connector_inference_metrics_lost_on_restart_spans")
		counted = v
		return ok
	}, 30*time.Second, 50*time.Millisecond, "the restart counted no lost window")
	windows, _ := promValue(tel, "otelcol_connector_inference_metrics_lost_on_restart_windows")
	t.Logf("accepted %d spans (%.0f/s); lost %.0f (marker %.0f); counted %.0f in %.0f window; %d accepted in the last %s",
		len(sent)*100, float64(len(sent)*100)/sent[len(sent)-1].Sub(start).Seconds(), lost, window, counted, windows, inWindow, interval+time.Second)
	assert.Equal(t, lost, counted, "the counted loss is the measured loss")
	assert.Equal(t, 1.0, windows)
	assert.LessOrEqual(t, counted, float64(inWindow), "more than one window of the load was lost")
	assert.Contains(t, c2.Output(), "stopped without flushing its window")
	c2.Stop()
}
