// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// engines are the OTLP clients of engine processes, one per service: the
// OpenTelemetry Go SDK's BatchSpanProcessor and OTLP/HTTP exporter, as
// vLLM's Python SDK sends its request spans.
type engines struct {
	t       *testing.T
	addr    string
	seq     uint32 // numbers the requests across services
	tracers map[string]*e2etest.Tracer
}

func newEngines(t *testing.T, addr string) *engines {
	return &engines{t: t, addr: addr, tracers: map[string]*e2etest.Tracer{}}
}

// send exports n finished vLLM request spans from service, the i-th of
// model models(i), ending now, in one export the collector must accept.
func (e *engines) send(service string, n int, models func(int) string) {
	e.t.Helper()
	tr, ok := e.tracers[service]
	if !ok {
		tr = e2etest.NewSDKTracer(e.t, e2etest.SDKOptions{Endpoint: e.addr, HTTP: true, BatchSize: 1000,
			Resource: e2etest.EngineResource(service, service+"-0")})
		e.tracers[service] = tr
	}
	require.LessOrEqual(e.t, n, 1000, "one export")
	tracer := tr.Tracer("vllm.llm_engine")
	end := time.Now()
	for i := range n {
		e.seq++
		_, s := tracer.Start(e.t.Context(), "llm_request", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(end.Add(-time.Second)), trace.WithAttributes(
				attribute.String("gen_ai.request.id", "cmpl-"+strconv.Itoa(int(e.seq))),
				attribute.String("gen_ai.request.model", models(i)),
				attribute.String("gen_ai.response.model", models(i)),
				attribute.Int("gen_ai.usage.prompt_tokens", 10),
				attribute.Int("gen_ai.usage.completion_tokens", 5),
				attribute.Float64("gen_ai.latency.time_in_queue", 0.01),
				attribute.Float64("gen_ai.latency.time_to_first_token", 0.1),
				attribute.Float64("gen_ai.latency.e2e", 1)))
		s.End(trace.WithTimestamp(end))
	}
	require.NoError(e.t, tr.FlushErr(e.t.Context()), "the collector refused an export of %s", service)
}

func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// samples counts the sample lines of a Prometheus text scrape.
func samples(scrape string) int {
	n := 0
	for _, l := range strings.Split(scrape, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

// TestCardinalityBurstThenRealRequests: through the shipped default config,
// a burst of 5,000 invented models from one service fills that service's
// share (max_series_per_service), not the whole limit: another service's
// real request shows its model at once; the bursting service's own real
// request shows its model once the burst's series expire
// (metrics_expiration); the overflow is logged. Then four more bursting
// services fill the whole limit, and the scrape's size at the default limit
// is measured (the figure in the connector README). On main the burst took
// every series for good and the overflow was silent (issue #30).
func TestCardinalityBurstThenRealRequests(t *testing.T) {
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env: append(defaultEnv(t, ports, t.TempDir()),
			"INFERPROF_METRICS_FLUSH_INTERVAL=200ms", "INFERPROF_METRICS_EXPIRATION=3s"),
	})
	otlp, prom := ports.Addr("otlp_http"), ports.Addr("prometheus")
	eng := newEngines(t, otlp)
	junk := func(prefix string) func(int) string {
		return func(i int) string { return prefix + strconv.Itoa(i) }
	}
	for i := range 5 {
		eng.send("attacker", 1000, junk("junk-"+strconv.Itoa(i)+"-"))
	}
	eng.send("vllm", 1, func(int) string { return "llama-real" })
	require.Eventually(t, func() bool {
		return strings.Contains(scrapeText(t, prom), `gen_ai_request_model="llama-real"`)
	}, 60*time.Second, 200*time.Millisecond, "another service's real request has no series of its own after the burst")
	require.Eventually(t, func() bool {
		return strings.Contains(c.Output(), "series limit reached")
	}, 10*time.Second, 100*time.Millisecond, "the overflow is not logged")

	// The burst goes idle and expires; the bursting service's own real
	// requests then get their model back.
	require.Eventually(t, func() bool {
		eng.send("attacker", 1, func(int) string { return "mistral-real" })
		return strings.Contains(scrapeText(t, prom), `gen_ai_request_model="mistral-real"`)
	}, 60*time.Second, 500*time.Millisecond, "the bursting service's real request never got its model back")
	assert.Equal(t, 1, strings.Count(c.Output(), "series limit reached"), "the overflow is logged once a minute at most")

	// Fill the whole limit (1000 series) from five services and measure a
	// full scrape.
	for s := range 5 {
		svc := "filler-" + strconv.Itoa(s)
		eng.send(svc, 260, junk(svc+"-"))
	}
	var scrape string
	require.Eventually(t, func() bool {
		scrape = scrapeText(t, prom)
		return strings.Count(scrape, "\ninferprof_server_requests_total{") >= 1000
	}, 60*time.Second, 200*time.Millisecond, "the limit never filled")
	n := samples(scrape)
	t.Logf("full scrape at the default limit: %d request series, %d samples, %.1f MB",
		strings.Count(scrape, "\ninferprof_server_requests_total{"), n, float64(len(scrape))/1e6)
	assert.Less(t, len(scrape), 64<<20, "a full scrape stays under 64 MiB")
	c.Stop()
}
