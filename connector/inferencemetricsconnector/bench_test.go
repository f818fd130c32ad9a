// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"context"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/agentrunprocessor"
	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor"
)

// vllmModels are four vLLM servers, one model each, as a small fleet sends them.
var vllmModels = []string{"meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3", "google/gemma-2-9b-it"}

// vllmBatch returns n llm_request spans shaped as vLLM v1 exports them,
// spread over four resources. With canonical set they also carry what the
// inference processor writes, so the connector can read them directly.
func vllmBatch(n int, canonical bool) ptrace.Traces {
	td := ptrace.NewTraces()
	per := n / len(vllmModels)
	for r, model := range vllmModels {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", "vllm-server")
		ra.PutStr("service.instance.id", "vllm-"+strconv.Itoa(r))
		ra.PutStr("host.name", "gpu-node-1")
		ra.PutStr(names.ResourceModelName, model)
		ra.PutStr("telemetry.sdk.language", "python")
		ra.PutStr("telemetry.sdk.name", "opentelemetry")
		ra.PutStr("telemetry.sdk.version", "1.38.0")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("vllm.llm_engine")
		spans := ss.Spans()
		spans.EnsureCapacity(per)
		for i := range per {
			s := spans.AppendEmpty()
			s.SetName("llm_request")
			s.SetKind(ptrace.SpanKindServer)
			s.SetTraceID(pcommon.TraceID{byte(r), byte(i), byte(i >> 8), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
			s.SetSpanID(pcommon.SpanID{byte(r), byte(i), byte(i >> 8), 1, 2, 3, 4, 5})
			in, out := int64(200+i%700), int64(20+i%300)
			queue, prefill := 0.002*float64(i%50), 0.01+0.0001*float64(in)
			decode := 0.02 * float64(out-1)
			ttft := queue + prefill + 0.003
			e2e := ttft + decode + 0.004
			s.SetStartTimestamp(pcommon.Timestamp(1_780_000_000_000_000_000 + uint64(i)*1_000_000))
			s.SetEndTimestamp(s.StartTimestamp() + pcommon.Timestamp(e2e*1e9))
			a := s.Attributes()
			a.EnsureCapacity(24)
			a.PutDouble(names.AttrTimeToFirstToken, ttft)
			a.PutDouble(names.AttrE2E, e2e)
			a.PutDouble(names.AttrTimeInQueue, queue)
			a.PutDouble(names.AttrTimeInPrefill, prefill)
			a.PutDouble(names.AttrTimeInDecode, decode)
			a.PutDouble("gen_ai.latency.time_in_model_inference", prefill+decode)
			a.PutInt("gen_ai.usage.prompt_tokens", in)
			a.PutInt("gen_ai.usage.completion_tokens", out)
			a.PutStr("gen_ai.request.id", "chatcmpl-"+strconv.Itoa(r*100000+i))
			a.PutStr("gen_ai.response.finish_reasons", `["stop"]`)
			a.PutDouble("gen_ai.request.top_p", 0.95)
			a.PutInt("gen_ai.request.max_tokens", 512)
			a.PutDouble("gen_ai.request.temperature", 0.7)
			a.PutInt("gen_ai.request.n", 1)
			if canonical {
				a.PutDouble(names.AttrTimePerOutputTok, decode/float64(out-1))
				a.PutDouble(names.AttrTimeInOther, e2e-queue-prefill-decode)
				a.PutStr(names.AttrBottleneck, "decode")
				a.PutInt(names.AttrInputTokens, in)
				a.PutInt(names.AttrOutputTokens, out)
				a.PutStr(names.AttrProviderName, names.ProviderVLLM)
				a.PutStr(names.AttrRequestModel, model)
				a.PutStr(names.AttrOperationName, "text_completion")
			}
		}
	}
	return td
}

// spanMetricsBaseline is contrib's span_metrics with its defaults plus the
// three semconv dimensions, so both sides key series the same way.
func spanMetricsBaseline(tb testing.TB, next consumer.Metrics, limit int) connector.Traces {
	tb.Helper()
	f := spanmetricsconnector.NewFactory()
	cfg := f.CreateDefaultConfig().(*spanmetricsconnector.Config)
	for _, d := range []string{names.AttrOperationName, names.AttrProviderName, names.AttrRequestModel} {
		cfg.Dimensions = append(cfg.Dimensions, spanmetricsconnector.Dimension{Name: d})
	}
	cfg.AggregationCardinalityLimit = limit
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(tb, err)
	return c
}

func ours(tb testing.TB, next consumer.Metrics, limit int) connector.Traces {
	tb.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.AggregationCardinalityLimit = limit
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(tb, err)
	return c
}

// oursKeyed is ours keyed on the shipped configs' exported identity
// (resource_metrics_key_attributes, identity.go).
func oursKeyed(tb testing.TB, next consumer.Metrics, limit int) connector.Traces {
	tb.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.AggregationCardinalityLimit = limit
	cfg.ResourceMetricsKeyAttributes = []string{
		"service.name", "service.namespace", "service.instance.id", "host.name", "container.id",
		"process.pid", "hw.id", "hw.name", "nvidia.gpu.index", "inferprof.activity.source",
	}
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(tb, err)
	return c
}

func startTraces(tb testing.TB, c interface {
	Start(context.Context, component.Host) error
	Shutdown(context.Context) error
},
) {
	tb.Helper()
	require.NoError(tb, c.Start(context.Background(), componenttest.NewNopHost()))
	tb.Cleanup(func() { require.NoError(tb, c.Shutdown(context.Background())) })
}

// BenchmarkConsumeTraces compares the connector alone with span_metrics on
// the same batches of vLLM request spans that already carry the processor's
// canonical attributes. Neither mutates its input, so the batch is reused.
func BenchmarkConsumeTraces(b *testing.B) {
	for _, n := range []int{100, 1000} {
		td := vllmBatch(n, true)
		for _, impl := range []struct {
			name string
			new  func(testing.TB, consumer.Metrics, int) connector.Traces
		}{{"span_metrics", spanMetricsBaseline}, {"ours", ours}, {"ours_keyed", oursKeyed}} {
			b.Run("spans="+strconv.Itoa(n)+"/impl="+impl.name, func(b *testing.B) {
				c := impl.new(b, consumertest.NewNop(), 5000)
				startTraces(b, c)
				ctx := context.Background()
				require.NoError(b, c.ConsumeTraces(ctx, td)) // create the series: steady state from here
				b.ReportAllocs()
				cpu := cpuTime()
				for b.Loop() {
					if err := c.ConsumeTraces(ctx, td); err != nil {
						b.Fatal(err)
					}
				}
				reportSpans(b, n, cpuTime()-cpu)
			})
		}
	}
}

// BenchmarkPipeline compares the inference processor feeding the connector
// with span_metrics, on raw vLLM spans. The processor writes to its input, so
// every iteration consumes a fresh copy of the batch; the copies are made in
// chunks with the timer stopped, so they are not part of the figures (they
// cost about as much as span_metrics' whole job and would dilute the ratio).
// ns/span is the wall clock per span from b.Elapsed, which also excludes the
// copies. cpu-ns/span is the process CPU time (all threads, GC included)
// summed over the timed stretches only; on a shared machine it does not
// count time spent waiting for a core, so it is the steadier figure. GC work
// that the copies' garbage causes can land in a timed stretch, alike for
// every impl.
//
// required_writes is not a pipeline: it only writes, through pdata's public
// API, the attributes the canonical table mandates on a vLLM span and
// that vLLM does not already send (TPOT, time_in_other, bottleneck, input and
// output tokens, provider, model, operation). It is the floor any processor
// writing that set pays before reading a single figure or feeding a
// connector. required_writes_phase_spans adds what phase_spans (on by
// default) must make on top, with the same calls the processor uses: per
// request three child spans, each with ids, name, kind, times and its one
// inferprof.synthetic attribute, the span slice grown once per batch.
func BenchmarkPipeline(b *testing.B) {
	const n, chunk = 1000, 16
	raw := vllmBatch(n, false)
	pipelines := []struct {
		name  string
		build func(testing.TB) consumer.Traces
	}{
		{"span_metrics", func(tb testing.TB) consumer.Traces {
			c := spanMetricsBaseline(tb, consumertest.NewNop(), 5000)
			startTraces(tb, c)
			return c
		}},
		{"ours", func(tb testing.TB) consumer.Traces { return processorPipeline(tb, true) }},
		{"ours_no_phase_spans", func(tb testing.TB) consumer.Traces { return processorPipeline(tb, false) }},
		{"required_writes", func(testing.TB) consumer.Traces { return requiredWrites{} }},
		{"required_writes_phase_spans", func(testing.TB) consumer.Traces { return requiredWrites{phaseSpans: true} }},
		// The loop and the copies alone: what the instruction counts of
		// bench-inference-instructions subtract (make bench-inference leaves
		// it out).
		{"none", func(testing.TB) consumer.Traces { return consumertest.NewNop() }},
	}
	for _, p := range pipelines {
		b.Run("spans="+strconv.Itoa(n)+"/impl="+p.name, func(b *testing.B) {
			next := p.build(b)
			ctx := context.Background()
			batches := make([]ptrace.Traces, chunk)
			var cpu time.Duration
			b.ReportAllocs()
			// b.Loop cannot stop its timer per chunk; count iterations by hand.
			for i := 0; i < b.N; {
				b.StopTimer()
				for j := range batches {
					batches[j] = ptrace.NewTraces()
					raw.CopyTo(batches[j])
				}
				b.StartTimer()
				start := cpuTime()
				for j := 0; j < chunk && i < b.N; j, i = j+1, i+1 {
					if err := consume(ctx, next, batches[j]); err != nil {
						b.Fatal(err)
					}
				}
				cpu += cpuTime() - start
			}
			spans := float64(n) * float64(b.N)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/spans, "ns/span")
			b.ReportMetric(float64(cpu.Nanoseconds())/spans, "cpu-ns/span")
		})
	}
}

// consume is the timed call, kept out of line so that callgrind can count
// the instructions inside it alone (--toggle-collect), without the copies.
//
//go:noinline
func consume(ctx context.Context, next consumer.Traces, td ptrace.Traces) error {
	return next.ConsumeTraces(ctx, td)
}

// requiredWrites writes the attributes of the canonical table that a
// vLLM span lacks, and nothing else, the way any processor must through
// pdata's public API: grow the slice once, then one Put per key (each Put
// allocates its value). The values are constants; computing them is free by
// comparison. With phaseSpans it also appends the three phase spans of each
// request.
type requiredWrites struct{ phaseSpans bool }

func (requiredWrites) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (w requiredWrites) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			spans := ss.Spans()
			n := spans.Len()
			if w.phaseSpans {
				spans.EnsureCapacity(4 * n)
			}
			for k := range n {
				s := spans.At(k)
				if w.phaseSpans {
					for j, name := range [...]string{names.SpanPhaseQueue, names.SpanPhasePrefill, names.SpanPhaseDecode} {
						p := spans.AppendEmpty()
						parent := spans.At(k)
						p.SetTraceID(parent.TraceID())
						p.SetSpanID(pcommon.SpanID{byte(j), 1, 2, 3, 4, 5, 6, 7})
						p.SetParentSpanID(parent.SpanID())
						p.SetName(name)
						p.SetKind(ptrace.SpanKindInternal)
						p.SetStartTimestamp(parent.StartTimestamp())
						p.SetEndTimestamp(parent.EndTimestamp())
						pa := p.Attributes()
						pa.EnsureCapacity(1)
						pa.PutBool(names.AttrSynthetic, true)
					}
				}
				a := s.Attributes()
				a.EnsureCapacity(a.Len() + 8)
				a.PutDouble(names.AttrTimePerOutputTok, 0.02)
				a.PutDouble(names.AttrTimeInOther, 0.004)
				a.PutStr(names.AttrBottleneck, "decode")
				a.PutInt(names.AttrInputTokens, 200)
				a.PutInt(names.AttrOutputTokens, 20)
				a.PutStr(names.AttrProviderName, names.ProviderVLLM)
				a.PutStr(names.AttrRequestModel, "meta-llama/Llama-3.1-8B-Instruct")
				a.PutStr(names.AttrOperationName, "chat")
			}
		}
	}
	return nil
}

func processorPipeline(tb testing.TB, phaseSpans bool) consumer.Traces {
	tb.Helper()
	conn := ours(tb, consumertest.NewNop(), 5000)
	startTraces(tb, conn)
	// agent_run runs after inference in the shipped pipelines (agent runs
	// and cost, which inference did before the split).
	af := agentrunprocessor.NewFactory()
	ar, err := af.CreateTraces(context.Background(), processortest.NewNopSettings(af.Type()), af.CreateDefaultConfig(), conn)
	require.NoError(tb, err)
	startTraces(tb, ar)
	f := inferenceprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*inferenceprocessor.Config)
	cfg.PhaseSpans = phaseSpans
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, ar)
	require.NoError(tb, err)
	startTraces(tb, p)
	// step_figures runs before inference in the shipped pipelines (it held
	// the inter-token and GPU work inference did before the split).
	sf := stepfiguresprocessor.NewFactory()
	s, err := sf.CreateTraces(context.Background(), processortest.NewNopSettings(sf.Type()), sf.CreateDefaultConfig(), p)
	require.NoError(tb, err)
	startTraces(tb, s)
	return s
}

// BenchmarkCardinalityAttack offers one million distinct model names (one
// million series) and reports the heap the connector holds afterwards, with
// aggregation_cardinality_limit 5000 on both sides.
func BenchmarkCardinalityAttack(b *testing.B) {
	const total, per = 1_000_000, 1000
	for _, impl := range []struct {
		name string
		new  func(testing.TB, consumer.Metrics, int) connector.Traces
	}{{"span_metrics", spanMetricsBaseline}, {"ours", ours}} {
		b.Run("series=1M/impl="+impl.name, func(b *testing.B) {
			td := vllmBatch(per, true)
			var heap uint64
			for b.Loop() {
				before := heapInUse()
				c := impl.new(b, consumertest.NewNop(), 5000)
				ctx := context.Background()
				for sent := 0; sent < total; sent += per {
					setModels(td, sent)
					if err := c.ConsumeTraces(ctx, td); err != nil {
						b.Fatal(err)
					}
				}
				heap = heapInUse() - min(before, heapInUse())
				runtime.KeepAlive(c)
				require.NoError(b, c.Shutdown(ctx))
			}
			b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		})
	}
}

// setModels gives every span of td its own model name, numbered from first.
func setModels(td ptrace.Traces, first int) {
	i := first
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				s.Attributes().PutStr(names.AttrRequestModel, "attack-"+strconv.Itoa(i))
				i++
			}
		}
	}
}

// reportSpans reports spans per wall-clock second, and the process CPU time
// per span: on a shared machine the wall clock includes time spent waiting
// for a core, CPU time does not.
func reportSpans(b *testing.B, n int, cpu time.Duration) {
	spans := float64(n) * float64(b.N)
	b.ReportMetric(spans/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/spans, "cpu-ns/span")
}

// cpuTime is the CPU time of the whole process, every thread (GC included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestSteadyStateAllocatesNothing holds the connector to zero allocations per
// batch once its series exist.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need a quiet run")
	}
	td := vllmBatch(100, true)
	// A step batch too: engine.step spans take the same path.
	steps := ptrace.NewTraces()
	rs := steps.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm-server")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName(names.SpanEngineStep)
	s.Attributes().PutInt(names.AttrStepDecodeReqs, 8)
	s.Attributes().PutInt(names.AttrStepScheduledToks, 8)
	s.Attributes().PutEmptySlice(names.AttrStepPreempted).AppendEmpty().SetStr("r1")
	rs.CopyTo(td.ResourceSpans().AppendEmpty())

	c := ours(t, consumertest.NewNop(), 5000)
	ctx := context.Background()
	require.NoError(t, c.ConsumeTraces(ctx, td))
	allocs := testing.AllocsPerRun(100, func() {
		_ = c.ConsumeTraces(ctx, td)
	})
	if raceEnabled {
		// pdatautil.MapHash takes its buffers from a sync.Pool, which the
		// race detector empties now and then: at most one refill (3
		// allocations) per resource hashed. Zero holds in the normal build.
		require.LessOrEqual(t, allocs, float64(3*td.ResourceSpans().Len()))
	} else {
		require.Zero(t, allocs)
	}
	require.NoError(t, c.Shutdown(ctx))
}

// TestCardinalityAttackIsBounded: 200,000 distinct models from one service
// leave that service's cap (max_series_per_service) plus one overflow series.
func TestCardinalityAttackIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 spans")
	}
	c := ours(t, consumertest.NewNop(), 5000).(*metricsConnector)
	td := vllmBatch(1000, true)
	for sent := 0; sent < 200_000; sent += 1000 {
		setModels(td, sent)
		require.NoError(t, c.ConsumeTraces(context.Background(), td))
	}
	require.Equal(t, c.cfg.MaxSeriesPerService+1, c.store.Len())
	require.NoError(t, c.Shutdown(context.Background()))
}
