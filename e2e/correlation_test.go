// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// Real kernel names of a vLLM decode (FlashAttention, cuBLAS, vLLM's own
// and its custom all-reduce), so the built-in category table sorts them.
const (
	kAttn   = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, true, false, false, false>(Flash_fwd_params)"
	kGemm   = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
	kNorm   = "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)"
	kReduce = "void vllm::cross_device_reduce_1stage<c10::BFloat16, 2>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, c10::BFloat16*, int, int)"
)

func us(n int) time.Duration { return time.Duration(n) * time.Microsecond }

// The timeline: two replicas of one model, both service.name "vllm", on one
// host. Replica A runs its model in its engine process; its kernels take
// longer than its steps, so step N's kernels run during step N+1's CPU
// time (async scheduling), and its third step comes after an idle pause.
// Replica B runs tensor-parallel on two workers (children of its engine
// process); its second step is one CUDA graph launch per worker.
func correlationTimeline(base time.Time) []*fakeReplica {
	step := func(i uint64, startMS, endMS int, tokens []fakeTokens, launches map[uint32][]fakeLaunch) fakeStep {
		return fakeStep{index: i, start: base.Add(time.Duration(startMS) * time.Millisecond), end: base.Add(time.Duration(endMS) * time.Millisecond), tokens: tokens, launches: launches}
	}
	eager := func(at int, ks ...fakeKernel) fakeLaunch { return fakeLaunch{at: us(at), kernels: ks} }
	a := &fakeReplica{instance: "replica-a", enginePID: 1000, procs: []fakeProcess{{pid: 1000, ppid: 999, uuid: [16]byte{0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}}}
	a.steps = []fakeStep{
		step(1, 0, 10, []fakeTokens{{"a-1", 1}}, map[uint32][]fakeLaunch{1000: {
			eager(1000, fakeKernel{kNorm, us(500)}), eager(1500, fakeKernel{kAttn, us(6000)}), eager(2000, fakeKernel{kGemm, us(5200)}),
		}}),
		step(2, 10, 20, []fakeTokens{{"a-1", 1}, {"a-2", 1}}, map[uint32][]fakeLaunch{1000: {
			eager(500, fakeKernel{kNorm, us(600)}), eager(900, fakeKernel{kAttn, us(7000)}), eager(1300, fakeKernel{kGemm, us(4100)}),
		}}),
		// After 30 ms of idling: the GPU waits on this step's CPU work.
		step(3, 50, 58, []fakeTokens{{"a-1", 1}, {"a-2", 3}}, map[uint32][]fakeLaunch{1000: {
			eager(2500, fakeKernel{kAttn, us(3000)}), eager(2600, fakeKernel{kGemm, us(1900)}),
		}}),
	}
	bw := func(pid uint32, u byte) fakeProcess {
		return fakeProcess{pid: pid, ppid: 2000, uuid: [16]byte{0xb0, u, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
	}
	b := &fakeReplica{instance: "replica-b", enginePID: 2000, procs: []fakeProcess{bw(2001, 1), bw(2002, 2)}}
	graph := fakeLaunch{at: us(300), graph: true, kernels: []fakeKernel{{kNorm, us(200)}, {kAttn, us(900)}, {kGemm, us(700)}, {kReduce, us(300)}}}
	b.steps = []fakeStep{
		step(1, 0, 12, []fakeTokens{{"b-1", 2}}, map[uint32][]fakeLaunch{
			2001: {eager(800, fakeKernel{kAttn, us(2500)}), eager(900, fakeKernel{kReduce, us(700)})},
			2002: {eager(850, fakeKernel{kAttn, us(2600)}), eager(950, fakeKernel{kReduce, us(800)})},
		}),
		step(2, 12, 16, []fakeTokens{{"b-1", 1}, {"b-2", 1}}, map[uint32][]fakeLaunch{2001: {graph}, 2002: {graph}}),
		step(3, 16, 22, []fakeTokens{{"b-1", 1}, {"b-2", 1}}, map[uint32][]fakeLaunch{
			2001: {eager(1000, fakeKernel{kGemm, us(1700)})},
			2002: {eager(1100, fakeKernel{kGemm, us(1600)})},
		}),
	}
	return []*fakeReplica{a, b}
}

// TestStepAndRequestGPUEndToEnd plays the timeline through the built
// collector: CUPTI frames into the cupti receiver, step datagrams into the
// engine_step receiver, request spans over OTLP. Every step span must carry
// exactly the GPU figures of the kernels it launched, and every request its
// token share of them. The first two steps' CUPTI data comes before their
// steps (held in the window); the third step comes before its CUPTI data,
// and the request spans arrive while it waits for its kernels.
func TestStepAndRequestGPUEndToEnd(t *testing.T) {
	const host = "e2e-gpu-node"
	sink := e2etest.NewSink(t)
	dir := socketDir(t)
	stepSock, cuptiSock := filepath.Join(dir, "step.sock"), filepath.Join(dir, "cupti.sock")
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
extensions:
  step_store: {}
receivers:
  engine_step:
    endpoint: %s
    step_store: step_store
  cupti:
    endpoint: %s
    step_store: step_store
    collection_interval: 100ms
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
processors:
  privacy: {}
  step_figures:
    # Long enough that steps pass because their kernels are in, not
    # because the wait ran out.
    gpu:
      wait: 2m
      step_store: step_store
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
  extensions: [step_store]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp, engine_step]
      processors: [privacy, step_figures, inference]
      exporters: [inference_metrics, otlp_grpc]
    metrics:
      receivers: [inference_metrics, cupti]
      exporters: [otlp_grpc]
`, stepSock, cuptiSock, sink.Endpoint))
	c := e2etest.Start(t, e2etest.Options{Config: cfg})

	base := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond)
	replicas := correlationTimeline(base)
	type stream struct {
		conn     net.Conn
		names    map[string]uint32
		launches []launchRec
		ran      []ranKernel
	}
	streams := map[uint32]*stream{}
	ran := map[*fakeReplica]map[uint32][]ranKernel{}
	isLast := func(r *fakeReplica) func(uint64) bool {
		return func(i uint64) bool { return i == r.steps[len(r.steps)-1].index }
	}
	// Phase 1: every process connects and sends the CUPTI data of all but
	// its engine's last step, before any step arrives.
	for _, r := range replicas {
		ran[r] = map[uint32][]ranKernel{}
		last := isLast(r)
		for _, p := range r.procs {
			launches, ks := r.simulate(p)
			ran[r][p.pid] = ks
			conn, err := net.Dial("unix", cuptiSock)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			s := &stream{conn: conn, names: map[string]uint32{}}
			streams[p.pid] = s
			early, held := split(launches, func(l launchRec) bool { return last(l.step) })
			earlyK, heldK := split(ks, func(k ranKernel) bool { return last(k.step) })
			s.launches, s.ran = held, heldK
			b := cuptiwire.AppendHelloFlags(nil, p.pid, cuptiwire.HelloLaunches, uint64(time.Now().UnixNano()), host)
			b = cuptiwire.AppendIdentity(b, p.ppid, r.instance, "vllm")
			b = cuptiwire.AppendDevice(b, cuptiwire.Device{Ordinal: 0, UUID: p.uuid})
			// The mark: every launch before the first one held back was sent.
			mark := time.Now()
			if len(s.launches) > 0 {
				mark = time.Unix(0, int64(s.launches[0].l.Time)-1000)
			}
			b = append(b, cuptiRecords(early, earlyK, mark, s.names)...)
			_, err = conn.Write(b)
			require.NoError(t, err)
		}
	}
	// The cupti receiver has read them once their kernels show in its metrics.
	require.Eventually(t, func() bool {
		n := 0
		for _, r := range replicas {
			for _, p := range r.procs {
				if cuptiKernelSeconds(sink.Metrics.AllMetrics(), int64(p.pid)) > 0 {
					n++
				}
			}
		}
		return n == 3
	}, 30*time.Second, 20*time.Millisecond, "cupti metrics\n%s", c.Output())

	// Phase 2: every step, the last ones still without their kernels.
	for _, r := range replicas {
		sendSteps(t, stepSock, host, r, func(fakeStep) bool { return true })
	}
	// The first steps pass as soon as their kernels are matched.
	require.Eventually(t, func() bool { return len(spansNamed(sink, names.SpanEngineStep)) == 4 }, 30*time.Second, 20*time.Millisecond)
	// The last steps wait for their kernels.
	for _, sp := range spansNamed(sink, names.SpanEngineStep) {
		idx, _ := sp.span.Attributes().Get(names.AttrStepIndex)
		assert.NotEqual(t, int64(3), idx.Int())
	}

	// The request spans, while the last steps wait.
	tracers := map[string]*e2etest.Tracer{}
	for _, r := range replicas {
		tracers[r.instance] = e2etest.NewTracer(t, ports.Addr("otlp"), attribute.String("service.name", "vllm"), attribute.String("service.instance.id", r.instance))
		got := map[string]int64{}
		for _, st := range r.steps {
			for _, tk := range st.tokens {
				got[tk.id] += tk.n
			}
		}
		for id, n := range got {
			start, end := base, r.steps[len(r.steps)-1].end.Add(time.Millisecond)
			tracers[r.instance].Send(t.Context(), "vllm.llm_engine", e2etest.SpanSpec{
				Name: "llm_request", Kind: trace.SpanKindServer, Start: start, End: end,
				Attributes: []attribute.KeyValue{
					attribute.String("gen_ai.request.id", id), attribute.String("gen_ai.response.model", "fake-model"),
					attribute.Int("gen_ai.usage.prompt_tokens", 16), attribute.Int64("gen_ai.usage.completion_tokens", n),
					attribute.Float64("gen_ai.latency.e2e", end.Sub(start).Seconds()),
					attribute.Float64("gen_ai.latency.time_to_first_token", 0.011),
					attribute.Float64("gen_ai.latency.time_in_queue", 0),
					attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.011),
					attribute.Float64("gen_ai.latency.time_in_model_decode", end.Sub(start).Seconds()-0.011),
				},
			})
		}
		tracers[r.instance].Flush(t)
	}
	// Phase 3: the last steps' CUPTI data.
	for _, r := range replicas {
		for _, p := range r.procs {
			s := streams[p.pid]
			_, err := s.conn.Write(cuptiRecords(s.launches, s.ran, time.Now(), s.names))
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool {
		return len(spansNamed(sink, names.SpanEngineStep)) == 6 &&
			len(spansNamed(sink, "llm_request")) == 4
	}, 30*time.Second, 20*time.Millisecond, "%s", c.Output())

	// Each step span: exactly its own kernels.
	steps := map[string]ptrace.Span{}
	for _, sp := range spansNamed(sink, names.SpanEngineStep) {
		pid, _ := sp.res.Attributes().Get(names.ResourceProcessPID)
		idx, _ := sp.span.Attributes().Get(names.AttrStepIndex)
		steps[fmt.Sprintf("%d/%d", pid.Int(), idx.Int())] = sp.span
	}
	want := map[string]stepFigures{}
	for _, r := range replicas {
		for i, f := range expectSteps(r, ran[r]) {
			want[fmt.Sprintf("%d/%d", r.enginePID, i)] = f
		}
	}
	for key, w := range want {
		sp, ok := steps[key]
		require.True(t, ok, key)
		a := sp.Attributes()
		_, missing := a.Get(names.AttrStepGPUMissing)
		assert.False(t, missing, "%s: %v", key, a.AsRaw())
		assert.InDelta(t, float64(w.kernelNS)/1e9, attrDouble(a, names.AttrStepGPUKernelTime), 1e-12, key)
		assert.Equal(t, w.count, attrInt(a, names.AttrStepGPUKernelCount), key)
		assert.Equal(t, w.graphs, attrInt(a, names.AttrStepGPUGraphCount), key)
		assert.InDelta(t, float64(w.busyNS)/1e9, attrDouble(a, names.AttrStepGPUBusyTime), 1e-12, key)
		assert.InDelta(t, float64(w.idleBeforeNS)/1e9, attrDouble(a, names.AttrStepGPUIdleBefore), 1e-12, key)
		assert.InDelta(t, float64(w.idleNS)/1e9, attrDouble(a, names.AttrStepGPUIdleTime), 1e-12, key)
		gotCats := zip(a, names.AttrStepGPUCategories, names.AttrStepGPUCategoryTimes)
		require.Len(t, gotCats, len(w.categories), key)
		for cat, ns := range w.categories {
			assert.InDelta(t, float64(ns)/1e9, gotCats[cat], 1e-12, "%s %s", key, cat)
		}
		top, _ := a.Get(names.AttrStepGPUTopKernels)
		assert.Equal(t, toAny(w.top), top.Slice().AsRaw(), key)
	}
	// The async case in numbers: replica A's step 1 kernels ran mostly in
	// step 2's time, yet step 1 has them.
	assert.Greater(t, ran[replicas[0]][1000][2].end, uint64(replicas[0].steps[1].start.UnixNano()))

	// Each request: its token share of each step's kernel time, and the
	// steps' idle time.
	for _, r := range replicas {
		fig := expectSteps(r, ran[r])
		wantTime, wantIdle := map[string]float64{}, map[string]uint64{}
		wantCats := map[string]map[string]float64{}
		for _, st := range r.steps {
			var total int64
			for _, tk := range st.tokens {
				total += tk.n
			}
			for _, tk := range st.tokens {
				share := float64(tk.n) / float64(total)
				wantTime[tk.id] += share * float64(fig[st.index].kernelNS)
				wantIdle[tk.id] += fig[st.index].idleNS
				if wantCats[tk.id] == nil {
					wantCats[tk.id] = map[string]float64{}
				}
				for cat, ns := range fig[st.index].categories {
					wantCats[tk.id][cat] += share * float64(ns)
				}
			}
		}
		for _, sp := range spansNamed(sink, "llm_request") {
			a := sp.span.Attributes()
			id, _ := a.Get("gen_ai.request.id")
			w, ok := wantTime[id.Str()]
			if !ok {
				continue
			}
			_, missing := a.Get(names.AttrGPUMissing)
			assert.False(t, missing, "%s: %v", id.Str(), a.AsRaw())
			assert.InDelta(t, w/1e9, attrDouble(a, names.AttrGPUTime), 1e-12, id.Str())
			assert.InDelta(t, float64(wantIdle[id.Str()])/1e9, attrDouble(a, names.AttrCPUOverhead), 1e-12, id.Str())
			gotCats := zip(a, names.AttrGPUCategories, names.AttrGPUCategoryTimes)
			require.Len(t, gotCats, len(wantCats[id.Str()]), id.Str())
			for cat, ns := range wantCats[id.Str()] {
				assert.InDelta(t, ns/1e9, gotCats[cat], 1e-12, "%s %s", id.Str(), cat)
			}
		}
	}

	// The GPUs: hw.id is the UUID of each process's device, beside the
	// replica's instance id.
	for _, r := range replicas {
		for _, p := range r.procs {
			res, ok := cuptiResource(sink.Metrics.AllMetrics(), int64(p.pid))
			require.True(t, ok, p.pid)
			assert.Equal(t, cuptiwire.UUIDString("GPU-", p.uuid), res["hw.id"], p.pid)
			assert.Equal(t, r.instance, res["service.instance.id"], p.pid)
		}
	}

	// The connector: GPU time per category for the model, over every request.
	c.Stop()
	var wantTotal, gotTotal float64
	for _, sp := range spansNamed(sink, "llm_request") {
		wantTotal += attrDouble(sp.span.Attributes(), names.AttrGPUTime)
	}
	for _, md := range sink.Metrics.AllMetrics() {
		sum := 0.0
		for _, m := range metricsOf(md, names.MetricGPUTime) {
			for _, dp := range m.Sum().DataPoints().All() {
				sum += dp.DoubleValue()
			}
		}
		if sum > 0 {
			gotTotal = sum // cumulative: the last flush holds the total
		}
	}
	assert.InDelta(t, wantTotal, gotTotal, 1e-12)
}

// split parts xs into those late says no to and those it says yes to.
func split[T any](xs []T, late func(T) bool) (early, lateOnes []T) {
	for _, x := range xs {
		if late(x) {
			lateOnes = append(lateOnes, x)
		} else {
			early = append(early, x)
		}
	}
	return early, lateOnes
}

func attrDouble(a pcommon.Map, k string) float64 {
	v, ok := a.Get(k)
	if !ok {
		return -1
	}
	return v.Double()
}

func attrInt(a pcommon.Map, k string) int64 {
	v, ok := a.Get(k)
	if !ok {
		return 0
	}
	return v.Int()
}

// zip reads two aligned array attributes into a map.
func zip(a pcommon.Map, keys, values string) map[string]float64 {
	out := map[string]float64{}
	k, _ := a.Get(keys)
	v, _ := a.Get(values)
	if k.Type() != pcommon.ValueTypeSlice || v.Type() != pcommon.ValueTypeSlice || k.Slice().Len() != v.Slice().Len() {
		return out
	}
	for i := 0; i < k.Slice().Len(); i++ {
		out[k.Slice().At(i).Str()] = v.Slice().At(i).Double()
	}
	return out
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func metricsOf(md pmetric.Metrics, name string) []pmetric.Metric {
	var out []pmetric.Metric
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() == name {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// cuptiKernelSeconds sums the kernel time the cupti receiver reported for pid.
func cuptiKernelSeconds(mds []pmetric.Metrics, pid int64) float64 {
	total := 0.0
	for _, md := range mds {
		for _, rm := range md.ResourceMetrics().All() {
			if p, ok := rm.Resource().Attributes().Get(names.ResourceProcessPID); !ok || p.Int() != pid {
				continue
			}
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() == names.MetricKernelDuration {
						for _, dp := range m.Sum().DataPoints().All() {
							total += dp.DoubleValue()
						}
					}
				}
			}
		}
	}
	return total
}

func cuptiResource(mds []pmetric.Metrics, pid int64) (map[string]any, bool) {
	for _, md := range mds {
		for _, rm := range md.ResourceMetrics().All() {
			if p, ok := rm.Resource().Attributes().Get(names.ResourceProcessPID); ok && p.Int() == pid {
				return rm.Resource().Attributes().AsRaw(), true
			}
		}
	}
	return nil, false
}
