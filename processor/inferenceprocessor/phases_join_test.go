// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadatatest"
)

var enginePhaseOrder = []string{"vllm.request.queue", "vllm.request.prefill", "vllm.request.decode"}

// basicRequest is the vllm_basic request span, alone in its batch, in trace
// i: its resource and scope, so its engine phase spans can be batched apart.
func basicRequest(t *testing.T, i byte) ptrace.Traces {
	t.Helper()
	td := readBatch(t, "vllm_basic")
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	require.Equal(t, 1, spans.Len())
	spans.At(0).SetTraceID(pcommon.TraceID{0: i, 15: 1})
	spans.At(0).SetSpanID(pcommon.SpanID{0: i, 7: 1})
	return td
}

// enginePhasesOf is a batch of the engine-written phase spans named phases
// under req's request span, with req's resource and scope, as the SDK
// exports them.
func enginePhasesOf(req ptrace.Traces, phases ...string) ptrace.Traces {
	td := ptrace.NewTraces()
	req.ResourceSpans().At(0).Resource().CopyTo(td.ResourceSpans().AppendEmpty().Resource())
	ss := td.ResourceSpans().At(0).ScopeSpans().AppendEmpty()
	src := req.ResourceSpans().At(0).ScopeSpans().At(0)
	src.Scope().CopyTo(ss.Scope())
	r := src.Spans().At(0)
	for _, name := range phases {
		s := ss.Spans().AppendEmpty()
		s.SetName(name)
		s.SetTraceID(r.TraceID())
		id := r.SpanID()
		id[6] = byte(len(name)) // distinct per phase
		s.SetSpanID(id)
		s.SetParentSpanID(r.SpanID())
		s.SetStartTimestamp(r.StartTimestamp())
		s.SetEndTimestamp(r.EndTimestamp())
	}
	return td
}

// withPhases is req with its engine phase spans in the same batch.
func withPhases(req ptrace.Traces, phases ...string) ptrace.Traces {
	enginePhasesOf(req, phases...).ResourceSpans().At(0).ScopeSpans().At(0).Spans().
		MoveAndAppendTo(req.ResourceSpans().At(0).ScopeSpans().At(0).Spans())
	return req
}

// phaseCounts counts, per request span id, the synthetic phase spans and
// the engine's own under it, and the request spans processed.
type phaseCounts struct{ synthetic, engine, requests map[string]int }

func countPhases(tds []ptrace.Traces) phaseCounts {
	c := phaseCounts{map[string]int{}, map[string]int{}, map[string]int{}}
	for _, s := range allSpans(tds...) {
		_, hasE2E := s.Attributes().Get(names.AttrE2E)
		switch {
		case isSynthetic(s):
			c.synthetic[s.ParentSpanID().String()]++
		case len(s.Name()) > len("vllm.request.") && strings.HasPrefix(s.Name(), "vllm.request."):
			c.engine[s.ParentSpanID().String()]++
		case hasE2E:
			c.requests[s.SpanID().String()]++
		}
	}
	return c
}

// TestEnginePhasesAcrossBatches: whatever the batch boundaries between a
// vLLM request span and the phase spans its engine wrote, the request goes
// out once, with the engine's three phase spans and none of ours.
func TestEnginePhasesAcrossBatches(t *testing.T) {
	q, p, d := enginePhaseOrder[0], enginePhaseOrder[1], enginePhaseOrder[2]
	type batch struct {
		request bool
		phases  []string
	}
	orders := []struct {
		name    string
		batches []batch
	}{
		{"same batch", []batch{{true, []string{q, p, d}}}},
		{"phases before", []batch{{false, []string{q, p, d}}, {true, nil}}},
		{"phases after", []batch{{true, nil}, {false, []string{q, p, d}}}},
		{"before and after", []batch{{false, []string{q}}, {true, nil}, {false, []string{p, d}}}},
		{"three batches before", []batch{{false, []string{q}}, {false, []string{p}}, {true, []string{d}}}},
		{"three batches after", []batch{{true, nil}, {false, []string{q}}, {false, []string{p, d}}}},
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			h := newHarness(t, goldenConfig(), metadatatest.NewSettings(tel))
			// An earlier request whose engine wrote its phase spans in the
			// same batch: the processor now knows this engine writes them.
			h.consume(t, withPhases(basicRequest(t, 9), q, p, d))
			req := basicRequest(t, 1)
			for _, b := range o.batches {
				td := enginePhasesOf(req, b.phases...)
				if b.request {
					td = withPhases(basicRequest(t, 1), b.phases...)
				}
				h.consume(t, td)
				h.now = h.now.Add(100 * time.Millisecond)
			}
			// Past the join's wait: anything still held is released.
			h.now = h.now.Add(time.Minute)
			h.p.expire(t.Context(), h.now)
			c := countPhases(h.output(t))
			require.Len(t, c.requests, 2)
			for id, n := range c.requests {
				assert.Equal(t, 1, n, id)
				assert.Equal(t, 3, c.engine[id], "the engine's phase spans, once each: %s", id)
				assert.Zero(t, c.synthetic[id], "no second copy: %s", id)
			}
			_, err := tel.GetMetric("otelcol_processor_inference_phase_spans")
			require.Error(t, err, "no synthetic phase span was made")
		})
	}
}

// TestEnginePhasesJoinCounted: each outcome of the cross-batch join is
// counted once per request.
func TestEnginePhasesJoinCounted(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	h := newHarness(t, goldenConfig(), metadatatest.NewSettings(tel))
	all := enginePhaseOrder
	h.consume(t, enginePhasesOf(basicRequest(t, 1), all...)) // before: engine
	h.consume(t, basicRequest(t, 1))
	h.consume(t, basicRequest(t, 2)) // after: superseded
	h.consume(t, enginePhasesOf(basicRequest(t, 2), all...))
	h.consume(t, basicRequest(t, 3))                         // never: released
	h.consume(t, enginePhasesOf(basicRequest(t, 4), all...)) // no request: unclaimed
	h.now = h.now.Add(10 * time.Minute)
	h.p.expire(t.Context(), h.now)
	c := countPhases(h.output(t))
	id3 := pcommon.SpanID{0: 3, 7: 1}.String()
	assert.Equal(t, 3, c.synthetic[id3], "the request whose engine wrote none gets ours after the wait")
	metadatatest.AssertEqualProcessorInferencePhaseJoin(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("outcome", "engine"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("outcome", "released"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("outcome", "superseded"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("outcome", "unclaimed"))},
	}, metricdatatest.IgnoreTimestamp())
}

// TestNoEnginePhasesNothingHeld: until an engine has written a phase span,
// a vLLM request's phase spans go out in its own batch, as before (vLLM
// 0.32 writes none).
func TestNoEnginePhasesNothingHeld(t *testing.T) {
	h := newHarness(t, goldenConfig(), metadatatest.NewSettings(componenttest.NewTelemetry()))
	h.consume(t, basicRequest(t, 1))
	require.Len(t, h.sink.AllTraces(), 1)
	c := countPhases(h.sink.AllTraces())
	assert.Equal(t, 3, c.synthetic[pcommon.SpanID{0: 1, 7: 1}.String()])
	assert.Zero(t, h.p.join.Len())
	require.NoError(t, h.tp.Shutdown(t.Context()))
}

// TestHasSpan: the request span is found beside its phase spans, far from
// them, or not at all.
func TestHasSpan(t *testing.T) {
	spans := ptrace.NewSpanSlice()
	for i := range 20 {
		spans.AppendEmpty().SetSpanID(pcommon.SpanID{7: byte(i + 1)})
	}
	for _, c := range []struct {
		near int
		id   byte
		want bool
	}{{10, 11, true}, {10, 8, true}, {0, 20, true}, {19, 1, true}, {10, 21, false}} {
		assert.Equalf(t, c.want, hasSpan(spans, spans.Len(), c.near, pcommon.SpanID{7: c.id}), "near %d, id %d", c.near, c.id)
	}
	assert.False(t, hasSpan(spans, 5, 2, pcommon.SpanID{7: 10}), "only spans[:n]")
}
