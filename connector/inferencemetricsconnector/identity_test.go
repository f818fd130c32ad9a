// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/names"
)

// twoProcesses sends n and m requests from two vLLM processes of one server:
// the same service.name, different vllm.process_id, and returns the
// requests counter of each emitted resource.
func twoProcesses(t *testing.T, h *harness, n, m int) []int64 {
	t.Helper()
	for i, count := range []int{n, m} {
		td, spans := batch(map[string]any{"service.name": "vllm-server", "host.name": "gpu-1", "vllm.process_id": int64(4100 + i)})
		for range count {
			h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10))
		}
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	}
	md := h.flush(t, time.Second)
	var out []int64
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		one := rm.Resource().Attributes()
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() == names.MetricRequests {
					out = append(out, ms.At(k).Sum().DataPoints().At(0).IntValue())
					_, hasPID := one.Get("vllm.process_id")
					assert.Equal(t, len(h.c.cfg.ResourceMetricsKeyAttributes) == 0, hasPID,
						"vllm.process_id is on the emitted resource only when no key attributes are set")
				}
			}
		}
	}
	return out
}

func TestKeyAttributesAddUpProcesses(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ResourceMetricsKeyAttributes = []string{"service.name", "host.name", "process.pid"}
	})
	assert.Equal(t, []int64{300}, twoProcesses(t, h, 100, 200), "two processes of one exported identity add up")
	assert.Equal(t, 1, h.c.store.Len(), "one request series and no more")
	// A later flush is cumulative over both: the counter never goes back.
	assert.Equal(t, []int64{303}, twoProcesses(t, h, 1, 2))
	rm := h.flush(t, time.Second).ResourceMetrics()
	require.Equal(t, 1, rm.Len())
	assert.Equal(t, map[string]any{"service.name": "vllm-server", "host.name": "gpu-1"}, rm.At(0).Resource().Attributes().AsRaw(),
		"only key attributes are emitted, in their configured order")
}

func TestWholeResourceKeysByDefault(t *testing.T) {
	h := newHarness(t, nil)
	assert.ElementsMatch(t, []int64{100, 200}, twoProcesses(t, h, 100, 200))
}

func TestKeyAttributesDimensionsReadWholeResource(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ResourceMetricsKeyAttributes = []string{"service.name"}
		c.Dimensions = []Dimension{{Name: "host.name"}}
	})
	td, spans := batch(vllmResource)
	h.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.5, 10, 10))
	require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	md := h.flush(t, time.Second)
	dp := metricsNamed(md, names.MetricRequests)[0].Sum().DataPoints().At(0)
	v, ok := dp.Attributes().Get("host.name")
	require.True(t, ok, "a dimension read from the resource outside the key attributes")
	assert.Equal(t, "gpu-1", v.Str())
}

func TestKeyAttributesValidate(t *testing.T) {
	for keys, want := range map[string][]string{
		"must not be empty": {"service.name", ""},
		"is listed twice":   {"service.name", "service.name"},
	} {
		c := createDefaultConfig().(*Config)
		c.ResourceMetricsKeyAttributes = want
		require.ErrorContains(t, c.Validate(), keys)
	}
}

// TestIdentityCacheIsBounded: every restart brings a new vllm.process_id,
// so the cache of identities must not grow with them; the series stay one.
func TestIdentityCacheIsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ResourceMetricsKeyAttributes = []string{"service.name"} })
	for pid := range maxIdentities + 10 {
		td, spans := batch(map[string]any{"service.name": "vllm-server", "vllm.process_id": int64(pid)})
		h.addSpan(spans, "llm_request", time.Second, map[string]any{names.AttrE2E: 1.0})
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
	}
	assert.LessOrEqual(t, len(h.c.idCache), maxIdentities)
	assert.Equal(t, 1, h.c.store.Len())
}
