// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestNVMLWithoutGPUStaysHealthy runs the built binary with the nvml receiver in a metrics and a
// logs pipeline on this GPU-less machine: NVML's Init fails with ERROR_LIBRARY_NOT_FOUND, the
// receiver warns once and idles, and the collector keeps serving health and OTLP until it exits
// cleanly on SIGTERM.
func TestNVMLWithoutGPUStaysHealthy(t *testing.T) {
	sink := e2etest.NewSink(t)
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
extensions:
  health_check:
    endpoint: {{addr "health"}}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
  nvml:
    collection_interval: 50ms
    initial_delay: 0s
    # Retry NVML on every scrape, so the test sees many retries and still one warning.
    init_retry_interval: 0s
exporters:
  otlp:
    endpoint: %s
    tls:
      insecure: true
service:
  extensions: [health_check]
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {{port "telemetry"}}
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp]
    metrics:
      receivers: [nvml]
      exporters: [otlp]
    logs:
      receivers: [nvml]
      exporters: [otlp]
`, sink.Endpoint))
	c := e2etest.Start(t, e2etest.Options{Config: cfg})

	// Both nvml scrapers have run (their scrape counters exist) and health stays OK.
	require.Eventually(t, func() bool {
		body := nvmlHTTPBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.Port("telemetry")))
		return strings.Contains(body, `otelcol_scraper_scraped_metric_points`) && strings.Contains(body, `receiver="nvml"`) &&
			strings.Contains(body, `otelcol_scraper_scraped_log_records`)
	}, 30*time.Second, 50*time.Millisecond, "nvml scrapers never ran\n%s", c.Output())
	assert.Equal(t, http.StatusOK, nvmlHTTPStatus("http://"+ports.Addr("health")+"/"), "health check")

	// OTLP is still served and forwarded while nvml idles.
	tr := e2etest.NewTracer(t, ports.Addr("otlp"))
	tr.Send(context.Background(), "e2e", e2etest.SpanSpec{Name: "still-serving", Start: time.Now(), End: time.Now().Add(time.Millisecond)})
	tr.Flush(t)
	require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= 1 }, 30*time.Second, 20*time.Millisecond)

	c.Stop()
	out := c.Output()
	assert.Equal(t, 1, strings.Count(out, "NVML is not available"), "exactly one warning\n%s", out)
	assert.Contains(t, out, "ERROR_LIBRARY_NOT_FOUND")
	assert.NotContains(t, out, "panic")
	assert.Zero(t, sink.Metrics.DataPointCount(), "no GPU, no GPU metrics")
	assert.Zero(t, sink.Logs.LogRecordCount(), "no GPU, no device events")
}

// TestNVMLInShippedDefaultConfig checks that config/default.yaml, which puts nvml in its metrics and
// logs pipelines, starts on a GPU-less machine with the one warning and shuts down cleanly.
func TestNVMLInShippedDefaultConfig(t *testing.T) {
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_NVML_INTERVAL=100ms"),
	})
	require.Contains(t, c.Output(), "NVML is not available")
	// Wait for the first nvml scrapes (after initial_delay) before stopping: the collector installs
	// its SIGTERM handler only after it logs that it is ready.
	require.Eventually(t, func() bool {
		body := nvmlHTTPBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.Port("telemetry")))
		return strings.Contains(body, `otelcol_scraper_scraped_log_records`) && strings.Contains(body, `receiver="nvml"`)
	}, 30*time.Second, 50*time.Millisecond, "nvml scrapers never ran\n%s", c.Output())
	c.Stop()
	assert.Equal(t, 1, strings.Count(c.Output(), "NVML is not available"))
}

func nvmlHTTP(url string) (int, string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, http.NoBody)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func nvmlHTTPBody(url string) string { _, body := nvmlHTTP(url); return body }

func nvmlHTTPStatus(url string) int { code, _ := nvmlHTTP(url); return code }
