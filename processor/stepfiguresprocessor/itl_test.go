// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor/internal/metadatatest"
)

var itlBase = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// stepBatch makes one engine.step span per end offset (seconds from
// itlBase); every step gives each of ids one token.
func stepBatch(service string, firstIndex int64, ends []float64, ids ...string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceServiceName, service)
	rs.Resource().Attributes().PutInt(names.ResourceProcessPID, 4242)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i, end := range ends {
		s := spans.AppendEmpty()
		s.SetName(names.SpanEngineStep)
		e := itlBase.Add(time.Duration(end * float64(time.Second)))
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(e.Add(-5 * time.Millisecond)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(e))
		s.Attributes().PutInt(names.AttrStepIndex, firstIndex+int64(i))
		idSlice := s.Attributes().PutEmptySlice(names.AttrStepRequestIDs)
		tokSlice := s.Attributes().PutEmptySlice(names.AttrStepRequestTokens)
		for _, id := range ids {
			idSlice.AppendEmpty().SetStr(id)
			tokSlice.AppendEmpty().SetInt(1)
		}
	}
	return td
}

// vllmSpan is a finished llm_request span of request id, from start to end
// seconds after itlBase.
func vllmSpan(service, id string, start, end float64, outputTokens int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceServiceName, service)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("llm_request")
	s.SetTraceID(pcommon.TraceID{1, 2, 3})
	s.SetSpanID(pcommon.SpanID{4, 5, 6})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(itlBase.Add(time.Duration(start * float64(time.Second)))))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(itlBase.Add(time.Duration(end * float64(time.Second)))))
	a := s.Attributes()
	a.PutStr("gen_ai.request.id", id)
	a.PutStr("gen_ai.response.model", "m")
	a.PutInt("gen_ai.usage.prompt_tokens", 10)
	a.PutInt("gen_ai.usage.completion_tokens", outputTokens)
	a.PutDouble("gen_ai.latency.e2e", end-start)
	a.PutDouble("gen_ai.latency.time_to_first_token", 0.1)
	a.PutDouble("gen_ai.latency.time_in_queue", 0.01)
	a.PutDouble("gen_ai.latency.time_in_model_prefill", 0.05)
	a.PutDouble("gen_ai.latency.time_in_model_decode", end-start-0.2)
	return td
}

func TestInterTokenLatencyFromSteps(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	// Tokens at 0.10, 0.12, 0.14, 0.30 (a stall), 0.32: gaps 20, 20, 160, 20 ms.
	steps := stepBatch("vllm", 1, []float64{0.10, 0.12, 0.14, 0.30, 0.32}, "req-1")
	spans, tel := runTraces(t, cfg, steps, vllmSpan("vllm", "req-1", 0, 0.35, 5))

	req := spans["llm_request"]
	assert.InDelta(t, 0.020, dbl(t, req, names.AttrITLP50), 1e-9)
	assert.InDelta(t, 0.160, dbl(t, req, names.AttrITLP99), 1e-9)
	assert.InDelta(t, 0.160, dbl(t, req, names.AttrITLMax), 1e-9)
	assert.Equal(t, int64(4), integer(t, req, names.AttrDecodeSteps))
	assert.Equal(t, int64(1), integer(t, req, names.AttrDecodeStalls))
	gaps, ok := req.Attributes().Get(names.AttrITLGaps)
	require.True(t, ok)
	require.Equal(t, 4, gaps.Slice().Len())
	for i, want := range []float64{0.02, 0.02, 0.16, 0.02} {
		assert.InDelta(t, want, gaps.Slice().At(i).Double(), 1e-9)
	}
	absent(t, req, names.AttrStepsMissing)

	// Step spans pass on untouched for the connector.
	step, ok := spans[names.SpanEngineStep]
	require.True(t, ok, "engine.step spans must pass through")
	_, ok = step.Attributes().Get(names.AttrStepRequestIDs)
	assert.True(t, ok)
	metadatatest.AssertEqualProcessorStepFiguresSteps(t, tel, []metricdata.DataPoint[int64]{{Value: 5}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestInterTokenLatencyStepsAfterRequestInBatch(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	// One batch carrying the request span before its steps still works.
	td := vllmSpan("vllm", "req-2", 0, 0.2, 3)
	stepBatch("vllm", 1, []float64{0.05, 0.10, 0.15}, "req-2").ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	spans, _ := runTraces(t, cfg, td)
	assert.InDelta(t, 0.05, dbl(t, spans["llm_request"], names.AttrITLMax), 1e-9)
}

func TestInterTokenLatencyMissingSteps(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.EngineSteps.MaxAge = time.Second

	t.Run("steps evicted before the request span came", func(t *testing.T) {
		// req-3 ran at 0..0.2 s; steps up to 5 s push its steps out of a 1 s window.
		early := stepBatch("vllm", 1, []float64{0.05, 0.10}, "req-3")
		late := stepBatch("vllm", 3, []float64{4.9, 5.0}, "other")
		spans, _ := runTraces(t, cfg, early, late, vllmSpan("vllm", "req-3", 0, 0.2, 2))
		req := spans["llm_request"]
		assert.Equal(t, "evicted", str(t, req, names.AttrStepsMissing))
		absent(t, req, names.AttrITLP50, names.AttrITLGaps, names.AttrDecodeSteps)
	})
	t.Run("engine without the step hook gets nothing", func(t *testing.T) {
		steps := stepBatch("vllm", 1, []float64{0.05, 0.10}, "req-4")
		spans, _ := runTraces(t, cfg, steps, vllmSpan("sglang-elsewhere", "req-4", 0, 0.2, 2))
		absent(t, spans["llm_request"], names.AttrStepsMissing, names.AttrITLP50)
	})
	t.Run("lost steps mark the figures incomplete", func(t *testing.T) {
		// Index 2 never arrives.
		a := stepBatch("vllm", 1, []float64{0.05}, "req-5")
		b := stepBatch("vllm", 3, []float64{0.15, 0.20}, "req-5")
		spans, _ := runTraces(t, cfg, a, b, vllmSpan("vllm", "req-5", 0, 0.25, 3))
		req := spans["llm_request"]
		assert.Equal(t, "incomplete", str(t, req, names.AttrStepsMissing))
		assert.Equal(t, int64(2), integer(t, req, names.AttrDecodeSteps))
	})
}

func TestInterTokenLatencyOff(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.EngineSteps.Enabled = false
	steps := stepBatch("vllm", 1, []float64{0.05, 0.10}, "req-6")
	spans, _ := runTraces(t, cfg, steps, vllmSpan("vllm", "req-6", 0, 0.2, 2))
	absent(t, spans["llm_request"], names.AttrITLP50, names.AttrStepsMissing)
}

func TestITLGapsCapped(t *testing.T) {
	ends := make([]float64, 0, 301)
	for i := range 301 {
		// 300 gaps: 10 ms, with every 30th 100 ms.
		gap := 0.01
		if i%30 == 29 {
			gap = 0.1
		}
		if i == 0 {
			ends = append(ends, 0.1)
			continue
		}
		ends = append(ends, ends[i-1]+gap)
	}
	run := func(maxGaps int) ptrace.Span {
		cfg := createDefaultConfig().(*Config)
		cfg.EngineSteps.MaxITLGaps = maxGaps
		spans, _ := runTraces(t, cfg, stepBatch("vllm", 1, ends, "req-1"),
			vllmSpan("vllm", "req-1", 0, ends[len(ends)-1]+0.01, int64(len(ends))))
		return spans["llm_request"]
	}
	s := run(256)
	v, ok := s.Attributes().Get(names.AttrITLGaps)
	require.True(t, ok)
	gaps := v.Slice()
	require.Equal(t, 256, gaps.Len())
	assert.InDelta(t, 0.01, gaps.At(0).Double(), 1e-9, "the smallest")
	assert.InDelta(t, 0.1, gaps.At(255).Double(), 1e-9, "the largest")
	// The share of long gaps survives: 10 of 300 then, about 256/30 now.
	long := 0
	for i := range gaps.Len() {
		if gaps.At(i).Double() > 0.05 {
			long++
		}
	}
	assert.InDelta(t, 256.0/30, long, 1)
	// The summaries still cover every gap.
	assert.InDelta(t, 0.1, dbl(t, s, names.AttrITLMax), 1e-9)
	assert.Equal(t, int64(300), integer(t, s, names.AttrDecodeSteps))

	s = run(0)
	absent(t, s, names.AttrITLGaps)
	assert.InDelta(t, 0.1, dbl(t, s, names.AttrITLMax), 1e-9)

	s = run(1000)
	v, _ = s.Attributes().Get(names.AttrITLGaps)
	assert.Equal(t, 300, v.Slice().Len(), "under the cap every gap, in order")
	assert.InDelta(t, 0.01, v.Slice().At(0).Double(), 1e-9)
	assert.InDelta(t, 0.1, v.Slice().At(28).Double(), 1e-9)
}

// TestOnlyWholeUnprocessedRequestsGetFigures: the figures go on a span that
// is a whole engine request with a string request id. vLLM's llm_core (the
// engine half of a request whose API span gets them), a span an inference
// processor upstream already processed, and a request id that is not a
// string get nothing, though their steps are in the window.
func TestOnlyWholeUnprocessedRequestsGetFigures(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	steps := stepBatch("vllm", 1, []float64{0.10, 0.12, 0.14}, "req-7")

	core := vllmSpan("vllm", "req-7", 0, 0.2, 3)
	s := core.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	s.SetName("llm_core")
	s.Events().AppendEmpty().SetName("journey.QUEUED")
	spans, _ := runTraces(t, cfg, clone(steps), core)
	absent(t, spans["llm_core"], names.AttrITLMax, names.AttrDecodeSteps, names.AttrStepsMissing)

	done := vllmSpan("vllm", "req-7", 0, 0.2, 3)
	done.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr(names.AttrBottleneck, "decode")
	spans, _ = runTraces(t, cfg, clone(steps), done)
	absent(t, spans["llm_request"], names.AttrITLMax, names.AttrDecodeSteps)

	intID := vllmSpan("vllm", "req-7", 0, 0.2, 3)
	intID.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutInt(names.AttrRequestID, 7)
	spans, _ = runTraces(t, cfg, clone(steps), intID)
	absent(t, spans["llm_request"], names.AttrITLMax, names.AttrDecodeSteps)

	// The same request as the engine wrote it does get them.
	spans, _ = runTraces(t, cfg, clone(steps), vllmSpan("vllm", "req-7", 0, 0.2, 3))
	assert.InDelta(t, 0.02, dbl(t, spans["llm_request"], names.AttrITLMax), 1e-9)
}

// TestBothOffPassesEverything: with engine_steps and gpu off the processor
// passes every span as it came.
func TestBothOffPassesEverything(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.EngineSteps.Enabled, cfg.GPU.Enabled = false, false
	in := stepBatch("vllm", 1, []float64{0.10, 0.12}, "req-8")
	vllmSpan("vllm", "req-8", 0, 0.2, 2).ResourceSpans().MoveAndAppendTo(in.ResourceSpans())
	want := clone(in)
	h := newHarness(t, cfg, processortest.NewNopSettings(processortest.NopType))
	h.consume(t, in)
	require.NoError(t, h.tp.Shutdown(t.Context()))
	require.Len(t, h.sink.AllTraces(), 1)
	assert.Equal(t, want, h.sink.AllTraces()[0])
}
