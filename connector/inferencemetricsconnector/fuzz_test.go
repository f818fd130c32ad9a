// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// FuzzConsumeTraces feeds arbitrary OTLP trace payloads, so arbitrary
// attribute maps, names and timestamps, through aggregation and a flush. The
// connector must neither panic nor emit a histogram whose buckets disagree
// with its count. Seeds: testdata/fuzz/FuzzConsumeTraces.
func FuzzConsumeTraces(f *testing.F) {
	var m ptrace.ProtoMarshaler
	seed, err := m.MarshalTraces(vllmBatch(4, true))
	require.NoError(f, err)
	f.Add(seed)
	td, spans := batch(vllmResource)
	(&harness{}).addSpan(spans, names.SpanEngineStep, time.Millisecond, map[string]any{
		names.AttrStepDecodeReqs: "8", names.AttrStepScheduledToks: -1, names.AttrStepPreempted: 3,
	})
	(&harness{}).addSpan(spans, "llm_request", time.Second, map[string]any{
		names.AttrE2E: "1.2s", names.AttrITLGaps: map[string]any{"a": 1}, names.AttrOutputTokens: 1e300,
	})
	seed, err = m.MarshalTraces(td)
	require.NoError(f, err)
	f.Add(seed)

	f.Fuzz(func(t *testing.T, b []byte) {
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			return
		}
		h := newHarness(t, func(c *Config) { c.AggregationCardinalityLimit = 8 })
		require.NoError(t, h.c.ConsumeTraces(t.Context(), td))
		md := h.flush(t, time.Second)
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Type() != pmetric.MetricTypeHistogram {
						continue
					}
					for _, dp := range m.Histogram().DataPoints().All() {
						var n uint64
						for _, c := range dp.BucketCounts().All() {
							n += c
						}
						require.Equal(t, dp.Count(), n, m.Name())
					}
				}
			}
		}
	})
}
