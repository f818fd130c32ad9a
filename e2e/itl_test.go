// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

func socketDir(t *testing.T) string {
	t.Helper()
	// Short: t.TempDir paths can pass the 107-byte socket path limit.
	dir, err := os.MkdirTemp("", "itl")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func allSpans(tds []ptrace.Traces) []ptrace.Span {
	var out []ptrace.Span
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// TestInterTokenLatencyEndToEnd runs the Python hook on a fake engine and
// sends the matching vLLM llm_request spans with the OpenTelemetry Go SDK.
// Each request span must come out with the inter-token gaps the engine's
// steps produced, and the ITL histogram must count every gap once.
func TestInterTokenLatencyEndToEnd(t *testing.T) {
	const service = "e2e-itl"
	sink := e2etest.NewSink(t)
	sock := filepath.Join(socketDir(t), "step.sock")
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
receivers:
  engine_step:
    endpoint: %s
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
processors:
  privacy: {}
  step_figures: {}
  inference:
    phase_spans: false
connectors:
  inference_metrics:
    metrics_flush_interval: 1h
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp, engine_step]
      processors: [privacy, step_figures, inference]
      exporters: [inference_metrics, otlp_grpc]
    metrics:
      receivers: [inference_metrics]
      exporters: [otlp_grpc]
`, sock, sink.Endpoint))
	c := e2etest.Start(t, e2etest.Options{Config: cfg})

	start := time.Now()
	engine := runFakeEngine(t, sock, service, "--engine", "vllm", "--step-ms", "10")
	steps := len(engine.Steps)
	end := time.Now()
	// Steps stream in while requests run; request spans come when they end.
	require.Eventually(t, func() bool {
		n := 0
		for _, s := range allSpans(sink.Traces.AllTraces()) {
			if s.Name() == names.SpanEngineStep {
				n++
			}
		}
		return n == steps
	}, 30*time.Second, 20*time.Millisecond, "engine.step spans\n%s", c.Output())

	// The token times every request got, from the steps as the engine ran them.
	type stepRec struct {
		index int64
		end   int64
		ids   []any
		toks  []any
	}
	var recs []stepRec
	for _, s := range allSpans(sink.Traces.AllTraces()) {
		if s.Name() != names.SpanEngineStep {
			continue
		}
		a := s.Attributes().AsRaw()
		recs = append(recs, stepRec{a[names.AttrStepIndex].(int64), int64(s.EndTimestamp()),
			a[names.AttrStepRequestIDs].([]any), a[names.AttrStepRequestTokens].([]any)})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].index < recs[j].index })
	tokenTimes := map[string][]int64{}
	for _, r := range recs {
		for i, id := range r.ids {
			if r.toks[i].(int64) > 0 {
				tokenTimes[id.(string)] = append(tokenTimes[id.(string)], r.end)
			}
		}
	}
	require.NotEmpty(t, tokenTimes)
	// The hook reports what the engine produced.
	for i, st := range engine.Steps {
		ids := make([]any, len(st.RequestIDs))
		for j, id := range st.RequestIDs {
			ids[j] = id
		}
		assert.Equal(t, ids, recs[i].ids, "step %d", i+1)
	}

	tracer := e2etest.NewTracer(t, ports.Addr("otlp"), attribute.String("service.name", service))
	totalGaps := 0
	wantGaps := map[string][]float64{}
	for id, times := range tokenTimes {
		var gaps []float64
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, float64(times[i]-times[i-1])/1e9)
		}
		wantGaps[id] = gaps
		totalGaps += len(gaps)
		e2e := end.Sub(start).Seconds()
		tracer.Send(t.Context(), "vllm.llm_engine", e2etest.SpanSpec{
			Name: "llm_request", Kind: trace.SpanKindServer, Start: start, End: end,
			Attributes: []attribute.KeyValue{
				attribute.String("gen_ai.request.id", id),
				attribute.String("gen_ai.response.model", "fake-model"),
				attribute.Int("gen_ai.usage.prompt_tokens", 16),
				attribute.Int("gen_ai.usage.completion_tokens", len(times)),
				attribute.Float64("gen_ai.latency.e2e", e2e),
				attribute.Float64("gen_ai.latency.time_to_first_token", float64(times[0]-start.UnixNano())/1e9),
				attribute.Float64("gen_ai.latency.time_in_queue", 0.001),
				attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.01),
				attribute.Float64("gen_ai.latency.time_in_model_decode", float64(times[len(times)-1]-times[0])/1e9),
			},
		})
	}
	tracer.Flush(t)
	require.Positive(t, totalGaps, "the fake engine produced no decode steps")

	require.Eventually(t, func() bool {
		n := 0
		for _, s := range allSpans(sink.Traces.AllTraces()) {
			if s.Name() == "llm_request" {
				n++
			}
		}
		return n == len(tokenTimes)
	}, 30*time.Second, 20*time.Millisecond)

	for _, s := range allSpans(sink.Traces.AllTraces()) {
		if s.Name() != "llm_request" {
			continue
		}
		a := s.Attributes()
		idv, _ := a.Get("gen_ai.request.id")
		want := wantGaps[idv.Str()]
		_, missing := a.Get(names.AttrStepsMissing)
		assert.Falsef(t, missing, "request %s: steps reported missing", idv.Str())
		steps, ok := a.Get(names.AttrDecodeSteps)
		require.Truef(t, ok, "request %s has no %s", idv.Str(), names.AttrDecodeSteps)
		assert.Equal(t, int64(len(want)), steps.Int(), idv.Str())
		if len(want) == 0 {
			continue
		}
		gv, ok := a.Get(names.AttrITLGaps)
		require.True(t, ok, idv.Str())
		got := make([]float64, gv.Slice().Len())
		for i := range got {
			got[i] = gv.Slice().At(i).Double()
		}
		assert.InDeltaSlicef(t, want, got, 1e-9, "request %s gaps", idv.Str())
		sorted := slices.Clone(want)
		slices.Sort(sorted)
		maxv, _ := a.Get(names.AttrITLMax)
		assert.InDelta(t, sorted[len(sorted)-1], maxv.Double(), 1e-9)
		p50, _ := a.Get(names.AttrITLP50)
		assert.InDelta(t, sorted[int(math.Ceil(0.5*float64(len(sorted))))-1], p50.Double(), 1e-9)
		// The fake engine's batches hold its GPU 10 ms each, one after the
		// other; a step ends when its update returns, which host work can
		// delay, so single gaps may be shorter but not typical ones.
		assert.GreaterOrEqual(t, sorted[len(sorted)/2], 0.009)
	}

	// Shutdown flushes the connector: one ITL sample per gap.
	c.Stop()
	var count uint64
	for _, md := range sink.Metrics.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != "inferprof.server.inter_token_latency" || m.Type() != pmetric.MetricTypeHistogram {
						continue
					}
					// Cumulative: the last flush holds the totals.
					count = 0
					for _, dp := range m.Histogram().DataPoints().All() {
						count += dp.Count()
					}
				}
			}
		}
	}
	assert.Equal(t, uint64(totalGaps), count, "ITL histogram count")
}

// TestDefaultConfigKeepsStepSpansOutOfTraceExport runs the shipped default
// config with the Python hook: engine.step spans must not reach the trace
// file, while request spans do.
func TestDefaultConfigKeepsStepSpansOutOfTraceExport(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	sock := filepath.Join(socketDir(t), "step.sock")
	env := append(defaultEnv(t, ports, dataDir), "INFERPROF_STEP_ENDPOINT="+sock)
	c := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: env})

	runFakeEngine(t, sock, "vllm", "--engine", "vllm", "--step-ms", "1")
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "vllm"))
	tracer.Send(t.Context(), "vllm.llm_engine", vllmRequest(time.Now().Add(-2*time.Second)))
	tracer.Flush(t)

	path := filepath.Join(dataDir, "inferprof-traces.jsonl")
	require.Eventually(t, func() bool {
		_, _, ok := findSpan(readTraces(t, path), "llm_request")
		return ok
	}, 30*time.Second, 50*time.Millisecond)
	// The request span was sent after every step, through the same pipeline.
	_, _, found := findSpan(readTraces(t, path), names.SpanEngineStep)
	assert.False(t, found, "engine.step spans reached the trace exporter")
	c.Stop()
}
