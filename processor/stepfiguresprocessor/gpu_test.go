// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/extension/stepstoreextension/stepstoretest"
	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/agentrunprocessor"
	"github.com/inferprof/inferprof/processor/inferenceprocessor"
)

type kernelNames []string

func (k kernelNames) KernelName(s uint32) string { return k[s] }

// gpuHarness is a started processor, the shared correlation window with a
// CUPTI source for one engine process, and a clock the test moves.
type gpuHarness struct {
	*harness
	win  *gpuwindow.Window
	src  *gpuwindow.Source
	now  atomic.Int64
	host string
	pid  int64
	attn uint8
	gemm uint8
}

func startGPU(t *testing.T, host string, withSource bool, next ...func(consumer.Traces) consumer.Traces) *gpuHarness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.GPU.StepStore = stepstoretest.Ref()
	g := &gpuHarness{harness: newHarness(t, cfg, processortest.NewNopSettings(processortest.NopType), next...), host: host, pid: 4242}
	g.now.Store(itlBase.UnixNano())
	g.p.now = func() time.Time { return time.Unix(0, g.now.Load()) }
	g.p.gpu.tick = time.Hour // the test ticks by hand (tick)
	hst, win := stepstoretest.NewHost(t)
	require.NoError(t, g.tp.Start(t.Context(), hst))
	t.Cleanup(func() { _ = g.tp.Shutdown(t.Context()) })
	g.win = win // the one the processor references
	if withSource {
		g.src = g.win.OpenSource(gpuwindow.SourceInfo{Host: host, PID: uint32(g.pid)}, kernelNames{"other", "flash_fwd", "gemm"})
		require.NotNil(t, g.src)
		t.Cleanup(g.src.Close)
	}
	g.attn, g.gemm = g.win.CategoryID("attention"), g.win.CategoryID("gemm")
	return g
}

func atMS(ms float64) uint64 {
	return uint64(itlBase.Add(time.Duration(ms * float64(time.Millisecond))).UnixNano())
}

// steps is one batch of engine.step spans of the harness's engine: each
// [start, end] in ms from itlBase, with its requests' tokens.
func (g *gpuHarness) steps(spans ...stepSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr(names.ResourceServiceName, "vllm")
	ra.PutStr(names.ResourceHostName, g.host)
	ra.PutInt(names.ResourceProcessPID, g.pid)
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	for _, st := range spans {
		s := ss.AppendEmpty()
		s.SetName(names.SpanEngineStep)
		s.SetTraceID(pcommon.TraceID{9, byte(st.index)})
		s.SetSpanID(pcommon.SpanID{9, byte(st.index)})
		s.SetStartTimestamp(pcommon.Timestamp(atMS(st.start)))
		s.SetEndTimestamp(pcommon.Timestamp(atMS(st.end)))
		s.Attributes().PutInt(names.AttrStepIndex, st.index)
		ids := s.Attributes().PutEmptySlice(names.AttrStepRequestIDs)
		toks := s.Attributes().PutEmptySlice(names.AttrStepRequestTokens)
		for id, n := range st.tokens {
			ids.AppendEmpty().SetStr(id)
			toks.AppendEmpty().SetInt(n)
		}
	}
	return td
}

type stepSpec struct {
	index      int64
	start, end float64
	tokens     map[string]int64
}

// tick moves the clock by d and releases what is due.
func (g *gpuHarness) tick(t *testing.T, d time.Duration) {
	g.now.Add(int64(d))
	g.p.tickGPU(t.Context(), g.p.now())
}

// released returns the spans the processor passed on, by name and step
// index or request id.
func (g *gpuHarness) released() map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range g.sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					key := s.Name()
					if v, ok := s.Attributes().Get(names.AttrStepIndex); ok {
						key += "/" + v.AsString()
					}
					if v, ok := s.Attributes().Get(names.AttrRequestID); ok {
						key += "/" + v.AsString()
					}
					out[key] = s
				}
			}
		}
	}
	return out
}

func strs(t *testing.T, s ptrace.Span, key string) []any {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.True(t, ok, key)
	return v.Slice().AsRaw()
}

// Step spans wait for the kernels they launched; with async scheduling,
// step 1's kernels run during step 2. A request waits for its steps and
// gets its token share of their kernel time, by category, and their idle
// time.
func TestStepsAndRequestsGetTheirGPUTime(t *testing.T) {
	g := startGPU(t, "gpu-test-async", true)
	g.consume(t, g.steps(
		stepSpec{1, 0, 10, map[string]int64{"a": 1}},
		stepSpec{2, 10, 20, map[string]int64{"a": 1, "b": 3}},
	))
	assert.Zero(t, g.sink.SpanCount(), "both steps wait for their kernels")
	// The request span arrives before its steps' kernels: it waits too.
	g.consume(t, vllmSpan("vllm", "a", 0, 0.021, 2))
	assert.Zero(t, g.sink.SpanCount())

	g.src.Launches([]cuptiwire.Launch{
		{Kind: cuptiwire.LaunchKindKernel, Correlation: 1, Time: atMS(1)},
		{Kind: cuptiwire.LaunchKindKernel, Correlation: 2, Time: atMS(2)},
		{Kind: cuptiwire.LaunchKindGraph, Correlation: 3, Time: atMS(11)},
		{Kind: cuptiwire.LaunchKindMark, Time: atMS(25)},
	}, g.p.now())
	g.src.Kernels([]gpuwindow.Kernel{
		{Correlation: 1, Series: 1, Category: g.attn, Start: atMS(9), End: atMS(13)},  // during step 2
		{Correlation: 2, Series: 2, Category: g.gemm, Start: atMS(13), End: atMS(15)}, // during step 2
		{Correlation: 3, Series: 2, Category: g.gemm, Start: atMS(16), End: atMS(18), Graph: true},
		{Correlation: 3, Series: 1, Category: g.attn, Start: atMS(18), End: atMS(19), Graph: true},
	}, g.p.now())
	g.tick(t, time.Second)
	require.Equal(t, 3, g.sink.SpanCount())

	out := g.released()
	s1, s2, req := out["engine.step/1"], out["engine.step/2"], out["llm_request/a"]
	assert.InDelta(t, 0.006, dbl(t, s1, names.AttrStepGPUKernelTime), 1e-12)
	assert.Equal(t, int64(2), integer(t, s1, names.AttrStepGPUKernelCount))
	assert.InDelta(t, 0.006, dbl(t, s1, names.AttrStepGPUBusyTime), 1e-12)
	assert.InDelta(t, 0.009, dbl(t, s1, names.AttrStepGPUIdleBefore), 1e-12, "from the step's start to its first kernel")
	assert.Equal(t, []any{"attention", "gemm"}, strs(t, s1, names.AttrStepGPUCategories))
	assert.Equal(t, []any{0.004, 0.002}, strs(t, s1, names.AttrStepGPUCategoryTimes))
	assert.Equal(t, []any{"flash_fwd", "gemm"}, strs(t, s1, names.AttrStepGPUTopKernels))
	absent(t, s1, names.AttrStepGPUMissing)

	assert.InDelta(t, 0.003, dbl(t, s2, names.AttrStepGPUKernelTime), 1e-12)
	assert.Equal(t, int64(2), integer(t, s2, names.AttrStepGPUKernelCount), "a graph counts its kernels")
	assert.Equal(t, int64(1), integer(t, s2, names.AttrStepGPUGraphCount))
	assert.InDelta(t, 0.001, dbl(t, s2, names.AttrStepGPUIdleBefore), 1e-12, "after step 1's last kernel")

	// a: all of step 1 and a quarter of step 2.
	assert.InDelta(t, 0.006+0.003/4, dbl(t, req, names.AttrGPUTime), 1e-12)
	assert.Equal(t, []any{"attention", "gemm"}, strs(t, req, names.AttrGPUCategories))
	assert.InDelta(t, 0.004+0.001/4, strs(t, req, names.AttrGPUCategoryTimes)[0].(float64), 1e-12)
	assert.InDelta(t, 0.009+0.001, dbl(t, req, names.AttrCPUOverhead), 1e-12)
	absent(t, req, names.AttrGPUMissing)
}

// An engine without a CUPTI stream: its steps pass at once and say so, and
// so do its requests.
func TestNoCUPTISource(t *testing.T) {
	g := startGPU(t, "gpu-test-nosource", false)
	g.consume(t, g.steps(stepSpec{1, 0, 10, map[string]int64{"a": 1}}))
	g.consume(t, vllmSpan("vllm", "a", 0, 0.011, 1))
	out := g.released()
	require.Len(t, out, 2)
	assert.Equal(t, "no_source", str(t, out["engine.step/1"], names.AttrStepGPUMissing))
	absent(t, out["engine.step/1"], names.AttrStepGPUKernelTime)
	assert.Equal(t, "no_source", str(t, out["llm_request/a"], names.AttrGPUMissing))
	absent(t, out["llm_request/a"], names.AttrGPUTime)
}

// A step whose kernels never come passes at gpu.wait with what arrived, and
// its request with it.
func TestWaitEndsWithWhatArrived(t *testing.T) {
	g := startGPU(t, "gpu-test-wait", true)
	g.consume(t, g.steps(stepSpec{1, 0, 10, map[string]int64{"a": 1}}))
	g.src.Launches([]cuptiwire.Launch{{Kind: cuptiwire.LaunchKindKernel, Correlation: 1, Time: atMS(1)}, {Kind: cuptiwire.LaunchKindMark, Time: atMS(20)}}, g.p.now())
	g.consume(t, vllmSpan("vllm", "a", 0, 0.011, 1))
	g.tick(t, 4*time.Second)
	assert.Zero(t, g.sink.SpanCount(), "the wait (5s) is not over")
	g.tick(t, 2*time.Second)
	require.Equal(t, 2, g.sink.SpanCount())
	out := g.released()
	assert.Equal(t, "no_kernels", str(t, out["engine.step/1"], names.AttrStepGPUMissing))
	assert.Equal(t, "no_kernels", str(t, out["llm_request/a"], names.AttrGPUMissing))
}

// A request held for its steps' GPU figures is priced when it is released,
// from the GPU time it got then (cost reads inferprof.gpu.time): the
// inference and agent_run processors come after step_figures in the
// pipeline, and agent_run prices.
func TestHeldRequestIsPricedByItsGPUTime(t *testing.T) {
	g := startGPU(t, "gpu-test-cost", true, func(next consumer.Traces) consumer.Traces {
		af := agentrunprocessor.NewFactory()
		acfg := af.CreateDefaultConfig().(*agentrunprocessor.Config)
		acfg.GPUHourPrice = map[string]agentrunprocessor.GPUPriceConfig{"NVIDIA H200": {Price: ptr(3.6), Currency: "USD"}}
		acfg.Cost.GPU = "NVIDIA H200"
		ap, err := af.CreateTraces(t.Context(), processortest.NewNopSettings(af.Type()), acfg, next)
		require.NoError(t, err)
		require.NoError(t, ap.Start(t.Context(), componenttest.NewNopHost()))
		t.Cleanup(func() { require.NoError(t, ap.Shutdown(context.Background())) })
		f := inferenceprocessor.NewFactory()
		cfg := f.CreateDefaultConfig().(*inferenceprocessor.Config)
		cfg.PhaseSpans = false
		tp, err := f.CreateTraces(t.Context(), processortest.NewNopSettings(f.Type()), cfg, ap)
		require.NoError(t, err)
		require.NoError(t, tp.Start(t.Context(), componenttest.NewNopHost()))
		t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
		return tp
	})
	g.consume(t, g.steps(stepSpec{1, 0, 10, map[string]int64{"a": 1, "b": 1}}))
	g.consume(t, vllmSpan("vllm", "a", 0, 0.011, 1))
	assert.Zero(t, g.sink.SpanCount(), "the request waits for its step's kernels")
	g.src.Launches([]cuptiwire.Launch{
		{Kind: cuptiwire.LaunchKindKernel, Correlation: 1, Time: atMS(1)},
		{Kind: cuptiwire.LaunchKindMark, Time: atMS(20)},
	}, g.p.now())
	g.src.Kernels([]gpuwindow.Kernel{{Correlation: 1, Series: 2, Category: g.gemm, Start: atMS(2), End: atMS(6)}}, g.p.now())
	g.tick(t, time.Second)
	require.Equal(t, 2, g.sink.SpanCount())
	req := g.released()["llm_request/a"]
	gpuTime := dbl(t, req, names.AttrGPUTime)
	assert.InDelta(t, 0.002, gpuTime, 1e-12, "half of the step's 4 ms")
	assert.Equal(t, "gpu_time", str(t, req, names.AttrRequestCostMethod))
	assert.InDelta(t, gpuTime*3.6/3600, dbl(t, req, names.AttrRequestCost), 1e-15)
}
