// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/exphist/exphisttest"
	"github.com/inferprof/inferprof/internal/names"
)

// signalsHist finds the /signals histogram of name whose tags hold value.
func signalsHist(doc signalsDoc, name, value string) map[string]any {
	for _, m := range doc.Metrics {
		if m.Name != name || m.Type != "histogram" {
			continue
		}
		for _, v := range m.Tags {
			if v == value || value == "" {
				return m.Stats
			}
		}
	}
	return nil
}

// Through the built binary and the shipped config: /signals reads TTFT
// percentiles of lognormal, bimodal and constant data from the connector's
// exponential twins, within 2% of the exact ones and saying so, and the
// step batch size of all-ones batches reads 1.
func TestSignalsPercentilesWithin2Percent(t *testing.T) {
	c, ports, _ := startShipped(t)
	r := rand.New(rand.NewPCG(27, 2))
	data := map[string][]float64{}
	for range 300 {
		data["model-lognormal"] = append(data["model-lognormal"], 0.159*math.Exp(0.6*r.NormFloat64()))
		v := 0.05 + 0.004*r.NormFloat64()
		if r.IntN(2) == 1 {
			v = 1.2 + 0.1*r.NormFloat64()
		}
		data["model-bimodal"] = append(data["model-bimodal"], v)
		data["model-constant"] = append(data["model-constant"], 0.25)
	}
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "e2e-pct"))
	start := time.Now().Add(-5 * time.Second)
	n := 0
	for model, vs := range data {
		for _, ttft := range vs {
			n++
			e2e := ttft + 1.5
			tracer.Send(t.Context(), "vllm.llm_engine", e2etest.SpanSpec{
				Name: "llm_request", Kind: trace.SpanKindServer, Start: start,
				End: start.Add(time.Duration(e2e * float64(time.Second))),
				Attributes: []attribute.KeyValue{
					attribute.String("gen_ai.request.id", "cmpl-"+model+"-"+time.Duration(n).String()),
					attribute.String("gen_ai.response.model", model),
					attribute.Int("gen_ai.usage.prompt_tokens", 16),
					attribute.Int("gen_ai.usage.completion_tokens", 11),
					attribute.Float64("gen_ai.latency.e2e", e2e),
					attribute.Float64("gen_ai.latency.time_to_first_token", ttft),
					attribute.Float64("gen_ai.latency.time_in_queue", 0.001),
					attribute.Float64("gen_ai.latency.time_in_model_prefill", ttft-0.001),
					attribute.Float64("gen_ai.latency.time_in_model_decode", 1),
					attribute.Float64("gen_ai.latency.time_in_model_inference", ttft-0.001+1),
				},
			})
		}
	}
	// Engine steps of one request each, as vLLM's step hook reports a
	// lone decode.
	stepTracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "e2e-pct"),
		attribute.String(names.ResourceEngineName, "vllm"))
	for i := range 50 {
		s := start.Add(time.Duration(i) * 10 * time.Millisecond)
		stepTracer.Send(t.Context(), "inferprof.engine_step", e2etest.SpanSpec{
			Name: names.SpanEngineStep, Kind: trace.SpanKindInternal, Start: s, End: s.Add(8 * time.Millisecond),
			Attributes: []attribute.KeyValue{
				attribute.Int(names.AttrStepPrefillReqs, 0), attribute.Int(names.AttrStepDecodeReqs, 1),
				attribute.Int(names.AttrStepScheduledToks, 1),
			},
		})
	}
	tracer.Flush(t)
	stepTracer.Flush(t)

	addr := ports.Addr("graphsignal_local")
	var doc signalsDoc
	require.Eventually(t, func() bool {
		var ok bool
		if doc, ok = getSignals(t, addr); !ok {
			return false
		}
		for model := range data {
			st := signalsHist(doc, names.MetricTimeToFirstToken, model)
			if st == nil || st["count"] != float64(300) || st["quantile_method"] != "exponential_histogram" {
				return false
			}
		}
		st := signalsHist(doc, names.MetricStepBatchSize, "")
		return st != nil && st["count"] == float64(50) && st["quantile_method"] == "exponential_histogram"
	}, 60*time.Second, 200*time.Millisecond, "/signals never showed the percentiles\n%s", c.Output())

	bounds := connectorBounds(t, names.MetricTimeToFirstToken)
	for model, vs := range data {
		st := signalsHist(doc, names.MetricTimeToFirstToken, model)
		relErr, ok := st["relative_error"].(float64)
		require.True(t, ok, "relative_error stated")
		assert.LessOrEqual(t, relErr, 0.02, model)
		for _, q := range []struct {
			key string
			q   float64
		}{{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}} {
			exact := exphisttest.NearestRank(vs, q.q)
			got, ok := st[q.key].(float64)
			require.Truef(t, ok, "%s %s", model, q.key)
			err := math.Abs(got-exact) / exact
			assert.LessOrEqualf(t, err, 0.02, "%s %s: %v against exact %v", model, q.key, got, exact)
			assert.LessOrEqualf(t, err, relErr*(1+1e-9), "%s %s within the stated bound", model, q.key)
			before := quantileOf(vs, bounds, q.q)
			t.Logf("%s %s: exact %.4f, exponential %.4f (%.2f%% off), semconv buckets %.4f (%.1f%% off)",
				model, q.key, exact, got, 100*err, before, 100*math.Abs(before-exact)/exact)
		}
	}
	st := signalsHist(doc, names.MetricStepBatchSize, "")
	for _, k := range []string{"p50", "p90", "p95", "p99"} {
		assert.Equal(t, 1.0, st[k], "batch size %s", k)
	}
}
