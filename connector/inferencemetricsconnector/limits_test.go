// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// burst sends n requests, each of a new invented model, from service.
func (h *harness) burst(t *testing.T, service string, n int) {
	t.Helper()
	td, spans := batch(map[string]any{"service.name": service})
	for i := range n {
		h.addSpan(spans, "llm_request", time.Second, canonical("junk-"+strconv.Itoa(i), 0.1, 1, 0, 0.1, 0.5, 10, 10))
	}
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
}

func (h *harness) request(t *testing.T, service, model string) {
	t.Helper()
	td, spans := batch(map[string]any{"service.name": service})
	h.addSpan(spans, "llm_request", time.Second, canonical(model, 0.1, 1, 0, 0.1, 0.5, 10, 10))
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
}

// TestBurstThenRealRequests: with the default limits, a burst of 5,000
// invented models from one service fills that service's share only; another
// service's requests keep their model at once, and the bursting service's own
// real requests get theirs back once the burst's series expire.
func TestBurstThenRealRequests(t *testing.T) {
	h := newHarness(t, nil)
	cfg := h.c.cfg
	h.burst(t, "attacker", 5000)
	assert.Equal(t, cfg.MaxSeriesPerService+1, h.c.store.Len(), "the service's cap and the overflow series")

	h.request(t, "vllm", "llama")
	h.request(t, "attacker", "llama")
	reqs := requestsBy(h.flush(t, time.Second))
	assert.Equal(t, int64(1), reqs[llama], "another service gets its model's series")
	assert.Equal(t, int64(5000-cfg.MaxSeriesPerService+1), reqs["otel.metric.overflow=true;"], "the bursting service's own request waits for expiry")

	// The burst's series go idle; after metrics_expiration they leave.
	h.flush(t, cfg.MetricsExpiration/2)
	h.request(t, "vllm", "llama") // keeps the real series alive
	h.flush(t, cfg.MetricsExpiration/2+time.Second)
	h.flush(t, time.Second)
	h.request(t, "attacker", "mistral")
	reqs = requestsBy(h.flush(t, time.Second))
	assert.Equal(t, int64(1), reqs["gen_ai.request.model=mistral;"], "after expiry the service's new model has a series again")
	assert.Equal(t, int64(2), reqs[llama])
	assert.NotContains(t, reqs, "gen_ai.request.model=junk-0;", "the burst expired")
}

// TestModelCap: one model's series are capped too, so that its dimensions
// (operations, error types, extra dimensions over many instances) cannot take
// the whole limit.
func TestModelCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSeriesPerModel = 3; c.MaxSeriesPerService = 0 })
	for i := range 5 {
		h.request(t, "vllm-"+strconv.Itoa(i), "llama")
	}
	h.request(t, "vllm-0", "mistral")
	reqs := requestsBy(h.flush(t, time.Second))
	assert.Equal(t, int64(3), reqs[llama])
	assert.Equal(t, int64(2), reqs["otel.metric.overflow=true;"])
	assert.Equal(t, int64(1), reqs["gen_ai.request.model=mistral;"])
}

// requestsBy sums inferprof.server.requests by model over every resource
// (sumPoints keeps one resource's value per key).
func requestsBy(md pmetric.Metrics) map[string]int64 {
	out := map[string]int64{}
	for _, m := range metricsNamed(md, "inferprof.server.requests") {
		for _, dp := range m.Sum().DataPoints().All() {
			out[attrString(dp.Attributes())] += dp.IntValue()
		}
	}
	return out
}

// TestOverflowLogged: the first overflow is logged at warn at once; a lasting
// one again at most once a minute, with the spans since.
func TestOverflowLogged(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := createDefaultConfig().(*Config)
	o := newOverflowLog(zap.New(core), cfg)
	o.note(t0, 3)
	o.note(t0.Add(10*time.Second), 4)
	o.note(t0.Add(59*time.Second), 5)
	require.Equal(t, 1, logs.Len())
	o.note(t0.Add(61*time.Second), 6)
	all := logs.TakeAll()
	require.Len(t, all, 2)
	assert.Equal(t, int64(3), all[0].ContextMap()["overflow_spans"])
	assert.Equal(t, int64(15), all[1].ContextMap()["overflow_spans"], "the spans since the last line")
	assert.Equal(t, int64(1000), all[1].ContextMap()["aggregation_cardinality_limit"])
}

// TestCompositeDimensionIsNoLabel: a kvlist or array dimension value is
// treated as missing (the default applies), never written as JSON text.
func TestCompositeDimensionIsNoLabel(t *testing.T) {
	none := "none"
	h := newHarness(t, func(c *Config) {
		c.Dimensions = []Dimension{{Name: "inferprof.lora.adapter", Default: &none}}
	})
	td, spans := batch(vllmResource)
	s := h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10))
	s.Attributes().PutEmptyMap("inferprof.lora.adapter").PutStr("gen_ai.prompt", "SECRET")
	s2 := h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10))
	s2.Attributes().PutEmptySlice("inferprof.lora.adapter").AppendEmpty().SetStr("SECRET")
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	assert.Equal(t, map[string]int64{llama + "inferprof.lora.adapter=none;": 2},
		sumPoints(t, h.flush(t, time.Second), "inferprof.server.requests"))
}
