// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/inferprof/inferprof/processor/stepfiguresprocessor/internal/metadatatest"
)

type harness struct {
	p    *stepFiguresProcessor
	tp   processor.Traces
	sink *consumertest.TracesSink
}

// newHarness is the processor on a sink; next, when given, goes between
// them (the processors that follow step_figures in a pipeline).
func newHarness(tb testing.TB, cfg *Config, set processor.Settings, next ...func(consumer.Traces) consumer.Traces) *harness {
	tb.Helper()
	h := &harness{sink: new(consumertest.TracesSink)}
	var out consumer.Traces = h.sink
	for i := len(next) - 1; i >= 0; i-- {
		out = next[i](out)
	}
	var err error
	h.p, h.tp, err = newTraces(tb.Context(), set, cfg, out)
	require.NoError(tb, err)
	now := time.Unix(1767225600, 0)
	h.p.now = func() time.Time { return now }
	return h
}

func (h *harness) consume(tb testing.TB, td ptrace.Traces) {
	tb.Helper()
	require.NoError(tb, h.tp.ConsumeTraces(tb.Context(), td))
}

// runTraces runs batches through the processor, shuts it down and returns
// what came out by span name.
func runTraces(t *testing.T, cfg *Config, tds ...ptrace.Traces) (map[string]ptrace.Span, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	h := newHarness(t, cfg, metadatatest.NewSettings(tel))
	for _, td := range tds {
		h.consume(t, td)
	}
	require.NoError(t, h.tp.Shutdown(t.Context()))
	return spansByName(h.sink.AllTraces()...), tel
}

func spansByName(tds ...ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out[s.Name()] = s
				}
			}
		}
	}
	return out
}

func dbl(t *testing.T, s ptrace.Span, key string) float64 {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.True(t, ok, "%s missing on %s", key, s.Name())
	require.Equal(t, pcommon.ValueTypeDouble, v.Type(), key)
	return v.Double()
}

func str(t *testing.T, s ptrace.Span, key string) string {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.True(t, ok, "%s missing on %s", key, s.Name())
	return v.Str()
}

func integer(t *testing.T, s ptrace.Span, key string) int64 {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.True(t, ok, "%s missing on %s", key, s.Name())
	require.Equal(t, pcommon.ValueTypeInt, v.Type(), key)
	return v.Int()
}

func absent(t *testing.T, s ptrace.Span, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, ok := s.Attributes().Get(k)
		assert.False(t, ok, "%s should be absent on %s", k, s.Name())
	}
}

func ptr(f float64) *float64 { return &f }
