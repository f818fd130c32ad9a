// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// vllmRequestTTFT is an llm_request span as vLLM v1 writes it, with the
// given time to first token.
func vllmRequestTTFT(start time.Time, i int, ttft float64) e2etest.SpanSpec {
	return e2etest.SpanSpec{
		Name:  "llm_request",
		Kind:  trace.SpanKindServer,
		Start: start,
		End:   start.Add(2 * time.Second),
		Attributes: []attribute.KeyValue{
			attribute.String("gen_ai.request.id", fmt.Sprintf("cmpl-e2e-%d", i)),
			attribute.Int("gen_ai.request.max_tokens", 128),
			attribute.Int("gen_ai.usage.prompt_tokens", 40+i),
			attribute.Int("gen_ai.usage.completion_tokens", 20),
			attribute.Float64("gen_ai.latency.time_in_queue", 0.01),
			attribute.Float64("gen_ai.latency.time_to_first_token", ttft),
			attribute.Float64("gen_ai.latency.e2e", 2.0),
			attribute.Float64("gen_ai.latency.time_in_model_prefill", ttft-0.02),
			attribute.Float64("gen_ai.latency.time_in_model_decode", 1.9-ttft),
			attribute.Float64("gen_ai.latency.time_in_model_inference", 1.88),
			attribute.String("gen_ai.response.finish_reasons", `["stop"]`),
		},
	}
}

// TestInferenceMetricsTTFTHistogram: vLLM spans go through the inference
// processor and the inference_metrics connector, both on default settings,
// and the gen_ai.server.time_to_first_token histogram that reaches an OTLP
// sink counts and sums exactly what was sent. Default settings flush every
// 15 s; stopping the collector flushes at once, which is what we rely on.
func TestInferenceMetricsTTFTHistogram(t *testing.T) {
	sink := e2etest.NewSink(t)
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
processors:
  privacy: {}
  step_figures: {}
  inference: {}
connectors:
  inference_metrics: {}
exporters:
  otlp_grpc:
    endpoint: SINK
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [privacy, step_figures, inference]
      exporters: [inference_metrics]
    metrics:
      receivers: [inference_metrics]
      exporters: [otlp_grpc]
`)
	c := e2etest.Start(t, e2etest.Options{Config: strings.Replace(cfg, "SINK", sink.Endpoint, 1)})

	tracer := e2etest.NewTracer(t, ports.Addr("otlp"),
		attribute.String("service.name", "vllm-server"),
		attribute.String("inferprof.model.name", "meta-llama/Llama-3.1-8B-Instruct"))
	ttfts := []float64{0.05, 0.12, 0.3, 0.45, 1.7}
	start := time.Now().Add(-5 * time.Second)
	sentTraces := map[string]bool{}
	wantSum := 0.0
	for i, ttft := range ttfts {
		sc := tracer.Send(t.Context(), "vllm.llm_engine", vllmRequestTTFT(start, i, ttft))
		sentTraces[sc.TraceID().String()] = true
		wantSum += ttft
	}
	// Flush returns once the collector has accepted the spans; with no batch
	// processor in the pipeline, the connector has aggregated them by then.
	tracer.Flush(t)
	c.Stop()

	var dp pmetric.HistogramDataPoint
	require.Eventually(t, func() bool {
		var ok bool
		dp, ok = findHistogramPoint(sink.Metrics.AllMetrics(), "gen_ai.server.time_to_first_token")
		return ok
	}, 10*time.Second, 50*time.Millisecond, "no gen_ai.server.time_to_first_token reached the sink")

	assert.Equal(t, uint64(len(ttfts)), dp.Count())
	assert.InDelta(t, wantSum, dp.Sum(), 1e-9)
	assert.InDelta(t, 0.05, dp.Min(), 1e-12)
	assert.InDelta(t, 1.7, dp.Max(), 1e-12)
	attrs := dp.Attributes().AsRaw()
	assert.Equal(t, "vllm", attrs["gen_ai.provider.name"])
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", attrs["gen_ai.request.model"])
	assert.NotEmpty(t, attrs["gen_ai.operation.name"])
	require.Positive(t, dp.Exemplars().Len())
	for i := 0; i < dp.Exemplars().Len(); i++ {
		assert.True(t, sentTraces[dp.Exemplars().At(i).TraceID().String()], "exemplar links to a trace that was sent")
	}
}

// TestDefaultConfigServesInferenceMetrics: with the shipped default config,
// request spans become Prometheus series on the prometheus exporter.
func TestDefaultConfigServesInferenceMetrics(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         append(defaultEnv(t, ports, dataDir), "INFERPROF_METRICS_FLUSH_INTERVAL=200ms"),
	})
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "vllm-server"))
	start := time.Now().Add(-5 * time.Second)
	for i, ttft := range []float64{0.1, 0.2, 0.4} {
		tracer.Send(t.Context(), "vllm.llm_engine", vllmRequestTTFT(start, i, ttft))
	}
	tracer.Flush(t)

	count := regexp.MustCompile(`(?m)^gen_ai_server_time_to_first_token_seconds_count\{[^}]*\} (\S+)$`)
	sum := regexp.MustCompile(`(?m)^gen_ai_server_time_to_first_token_seconds_sum\{[^}]*\} (\S+)$`)
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ports.Addr("prometheus") + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		m := count.FindStringSubmatch(body)
		return m != nil && m[1] == "3"
	}, 30*time.Second, 100*time.Millisecond, "TTFT histogram never reached prometheus")
	m := sum.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	got, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.InDelta(t, 0.7, got, 1e-9)
	assert.Contains(t, body, "inferprof_server_requests_total")
	c.Stop()
}

func findHistogramPoint(all []pmetric.Metrics, name string) (pmetric.HistogramDataPoint, bool) {
	for _, md := range all {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() == name && m.Type() == pmetric.MetricTypeHistogram && m.Histogram().DataPoints().Len() > 0 {
						return m.Histogram().DataPoints().At(0), true
					}
				}
			}
		}
	}
	return pmetric.HistogramDataPoint{}, false
}
