// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor"
)

// base is the fixture's wall clock origin.
var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(s float64) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(base.Add(time.Duration(s * float64(time.Second))))
}

// fixtureRequest is one request the fixture sends: a vLLM llm_request span
// with the attributes vLLM's do_tracing writes (vllm/v1/engine/
// output_processor.py; the same shape as e2e/default_config_test.go
// vllmRequest), tokens given by the steps below.
type fixtureRequest struct {
	id                           string
	start, end                   float64 // s after base
	queue, ttft, prefill, decode float64
	inTokens, outTokens          int64
	steps                        []int // indexes of the steps that gave it a token
}

// fixtureStep follows receiver/enginestepreceiver/span.go (traces): one
// resource per step with service.name, inferprof.engine.*, process.pid,
// host.name, service.instance.id; the span's ids derive from the instance
// and index.
type fixtureStep struct {
	index           int64
	start, end      float64
	prefill, decode int64
	tokens          int64
	kv              float64
	ids             []string
}

// fixtureKernel follows receiver/cuptireceiver/internal/aggregate/spans.go
// (FlushSpans): name = shortened kernel name, attributes gpu.kernel.name,
// gpu.kernel.category, hw.id, inferprof.gpu.stream,
// inferprof.cuda.correlation_id; resource host.name, process.pid,
// inferprof.activity.source; the span link to the launching step, as
// aggregate/spans.go FlushSpans adds it; step < 0 leaves it out.
type fixtureKernel struct {
	name, category string
	device         string
	stream         int64
	start, end     float64
	step           int
}

type fixture struct {
	service  string
	instance string // service.instance.id; "" leaves the engine_step receiver's process form
	tag      byte   // in trace and span ids, to keep replicas' ids apart
	requests []fixtureRequest
	steps    []fixtureStep
	kernels  []fixtureKernel
	util     []float64 // NVML utilisation fractions, one a second from base+1
	power    []float64
	memUsed  float64
	memLimit float64
}

func stepIDs(service string, index int64) (pcommon.TraceID, pcommon.SpanID) {
	var tid pcommon.TraceID
	copy(tid[:], fmt.Sprintf("%-8s%08d", service, index))
	var sid pcommon.SpanID
	copy(sid[:], fmt.Sprintf("s%07d", index))
	return tid, sid
}

func newFixture() fixture {
	f := fixture{service: "vllm-a", memUsed: 40 << 30, memLimit: 80 << 30}
	// Steps every 20 ms from 0.900 s; each 15 ms long. r0 (whose request
	// span is not sent) runs in steps 0..1; r1 gets its first token in step
	// 3 (a prefill step) and decodes in 4..8; r2 prefills in step 5 and
	// decodes in 6..10.
	for i := range 14 {
		st := fixtureStep{index: int64(100 + i), start: 0.900 + 0.02*float64(i), kv: 0.1 + 0.01*float64(i)}
		st.end = st.start + 0.015
		f.steps = append(f.steps, st)
	}
	give := func(step int, id string, prefill bool) {
		st := &f.steps[step]
		st.ids = append(st.ids, id)
		if prefill {
			st.prefill++
			st.tokens += 32
		} else {
			st.decode++
			st.tokens++
		}
	}
	give(0, "cmpl-r0", true)
	give(1, "cmpl-r0", false)
	r1 := fixtureRequest{id: "cmpl-r1", start: 0.950, queue: 0.003, prefill: 0.012, inTokens: 32, steps: []int{3, 4, 5, 6, 7, 8}}
	r2 := fixtureRequest{id: "cmpl-r2", start: 0.940, queue: 0.030, prefill: 0.025, inTokens: 32, steps: []int{5, 6, 7, 8, 9, 10}}
	for _, r := range []*fixtureRequest{&r1, &r2} {
		for j, s := range r.steps {
			give(s, r.id, j == 0)
		}
		first := f.steps[r.steps[0]].end
		last := f.steps[r.steps[len(r.steps)-1]].end
		r.ttft = first - r.start
		r.decode = last - first
		r.end = last + 0.005
		r.outTokens = int64(len(r.steps))
	}
	f.requests = []fixtureRequest{r1, r2}
	// Kernels on GPU 0: two streams; the first three carry their step.
	f.kernels = []fixtureKernel{
		{name: "flash::flash_fwd_kernel", category: "attention_prefill", device: "0", stream: 7, start: 0.962, end: 0.966, step: 3},
		{name: "sm90_xmma_gemm_bf16bf16", category: "gemm", device: "0", stream: 7, start: 0.966, end: 0.972, step: 3},
		{name: "vllm::paged_attention_v2_kernel", category: "attention_decode", device: "0", stream: 7, start: 0.982, end: 0.990, step: 4},
		{name: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", category: "communication", device: "0", stream: 13, start: 0.984, end: 0.988, step: -1},
	}
	f.util = []float64{0.5, 0.75, 0.9}
	f.power = []float64{300, 450, 610}
	return f
}

// replica is newFixture's traffic served by another engine instance of the
// same service.name, as inferprof-run starts them: its own
// service.instance.id, process, request ids, step indexes, trace ids and
// GPU.
func replica(instance string, tag byte, device string) fixture {
	f := newFixture()
	f.instance, f.tag = instance, tag
	for i := range f.steps {
		f.steps[i].index += 1000 * int64(tag)
		for j := range f.steps[i].ids {
			f.steps[i].ids[j] += "-" + instance
		}
	}
	for i := range f.requests {
		f.requests[i].id += "-" + instance
	}
	for i := range f.kernels {
		f.kernels[i].device = device
	}
	return f
}

// traces builds the fixture's spans and runs the request spans through the
// real inference processor (phase spans and ITL from the steps), as the
// shipped traces pipeline does.
func (f fixture) traces(t *testing.T) ptrace.Traces {
	t.Helper()
	in := ptrace.NewTraces()
	for _, st := range f.steps {
		rs := in.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr(names.ResourceServiceName, f.service)
		ra.PutStr(names.ResourceEngineName, "vllm")
		ra.PutInt(names.ResourceProcessPID, 4242+int64(f.tag))
		ra.PutStr(names.ResourceHostName, "gpu-node-1")
		ra.PutInt(names.ResourceEngineIndex, 0)
		if f.instance != "" {
			ra.PutStr(names.ResourceServiceInstance, f.instance)
		} else {
			ra.PutStr(names.ResourceServiceInstance, "gpu-node-1/4242/0")
		}
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(names.SpanEngineStep)
		tid, sid := stepIDs(f.service, st.index)
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		sp.SetStartTimestamp(at(st.start))
		sp.SetEndTimestamp(at(st.end))
		a := sp.Attributes()
		a.PutInt(names.AttrStepIndex, st.index)
		a.PutInt(names.AttrStepPrefillReqs, st.prefill)
		a.PutInt(names.AttrStepDecodeReqs, st.decode)
		a.PutInt(names.AttrStepScheduledToks, st.tokens)
		a.PutInt(names.AttrStepRunningReqs, int64(len(st.ids)))
		a.PutInt(names.AttrStepWaitingReqs, 0)
		a.PutDouble(names.AttrStepKVCacheUsage, st.kv)
		ids := a.PutEmptySlice(names.AttrStepRequestIDs)
		toks := a.PutEmptySlice(names.AttrStepRequestTokens)
		for _, id := range st.ids {
			ids.AppendEmpty().SetStr(id)
			toks.AppendEmpty().SetInt(1)
		}
	}
	reqs := ptrace.NewTraces()
	rs := reqs.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceServiceName, f.service)
	if f.instance != "" {
		rs.Resource().Attributes().PutStr(names.ResourceServiceInstance, f.instance)
	}
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i, r := range f.requests {
		sp := spans.AppendEmpty()
		sp.SetName("llm_request")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetTraceID(pcommon.TraceID{0xaa, byte(i + 1), f.tag})
		sp.SetSpanID(pcommon.SpanID{0xbb, byte(i + 1), f.tag})
		sp.SetStartTimestamp(at(r.start))
		sp.SetEndTimestamp(at(r.end))
		a := sp.Attributes()
		a.PutStr("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
		a.PutStr("gen_ai.request.id", r.id)
		a.PutInt("gen_ai.usage.prompt_tokens", r.inTokens)
		a.PutInt("gen_ai.usage.completion_tokens", r.outTokens)
		a.PutDouble("gen_ai.latency.time_in_queue", r.queue)
		a.PutDouble("gen_ai.latency.time_to_first_token", r.ttft)
		a.PutDouble("gen_ai.latency.e2e", r.end-r.start)
		a.PutDouble("gen_ai.latency.time_in_model_prefill", r.prefill)
		a.PutDouble("gen_ai.latency.time_in_model_decode", r.decode)
		a.PutDouble("gen_ai.latency.time_in_model_inference", r.prefill+r.decode)
	}

	// step_figures (ITL from the steps), then inference (phase spans), as
	// the shipped traces pipeline runs them.
	sink := new(consumertest.TracesSink)
	pf := inferenceprocessor.NewFactory()
	p, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	sf := stepfiguresprocessor.NewFactory()
	s, err := sf.CreateTraces(context.Background(), processortest.NewNopSettings(sf.Type()), sf.CreateDefaultConfig(), p)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, s.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, s.ConsumeTraces(context.Background(), in))
	require.NoError(t, s.ConsumeTraces(context.Background(), reqs))
	require.NoError(t, s.Shutdown(context.Background()))
	require.NoError(t, p.Shutdown(context.Background()))

	out := ptrace.NewTraces()
	for _, td := range sink.AllTraces() {
		td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	// Kernel spans come from the cupti receiver's own traces pipeline.
	krs := out.ResourceSpans().AppendEmpty()
	ka := krs.Resource().Attributes()
	ka.PutStr(names.ResourceHostName, "gpu-node-1")
	ka.PutInt(names.ResourceProcessPID, 4242+int64(f.tag))
	ka.PutStr("inferprof.activity.source", "cupti")
	kspans := krs.ScopeSpans().AppendEmpty().Spans()
	for i, k := range f.kernels {
		sp := kspans.AppendEmpty()
		sp.SetName(k.name)
		sp.SetTraceID(pcommon.TraceID{0xcc, 1, f.tag})
		sp.SetSpanID(pcommon.SpanID{0xcc, byte(i + 1), f.tag})
		sp.SetKind(ptrace.SpanKindInternal)
		sp.SetStartTimestamp(at(k.start))
		sp.SetEndTimestamp(at(k.end))
		a := sp.Attributes()
		a.PutStr(names.AttrKernelName, k.name)
		a.PutStr(names.AttrKernelCategory, k.category)
		a.PutStr(names.AttrDeviceID, k.device)
		a.PutInt(attrStream, k.stream)
		a.PutInt(attrCorrelation, int64(1000+i))
		if k.step >= 0 {
			l := sp.Links().AppendEmpty()
			tid, sid := stepIDs(f.service, f.steps[k.step].index)
			l.SetTraceID(tid)
			l.SetSpanID(sid)
		}
	}
	return out
}

// metrics follows receiver/nvmlreceiver/scraper.go: one resource per device
// with hw.id (UUID), hw.name, host.name; hw.gpu.utilization per task.
func (f fixture) metrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr(names.ResourceHostName, "gpu-node-1")
	ra.PutStr(names.AttrDeviceID, "GPU-5a3f0c1e-8e2b-4c1d-9f7a-0123456789ab")
	ra.PutStr("hw.name", "NVIDIA H200")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	util := ms.AppendEmpty()
	util.SetName(metricGPUUtil)
	dec := ms.AppendEmpty()
	dec.SetName(metricGPUUtil)
	pow := ms.AppendEmpty()
	pow.SetName(metricGPUPower)
	mem := ms.AppendEmpty()
	mem.SetName(metricGPUMemUsed)
	lim := ms.AppendEmpty()
	lim.SetName(metricGPUMemLimit)
	ug, dg, pg := util.SetEmptyGauge(), dec.SetEmptyGauge(), pow.SetEmptyGauge()
	for i, u := range f.util {
		ts := at(1 + float64(i))
		dp := ug.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(u)
		dp.Attributes().PutStr(attrGPUTask, "general")
		d := dg.DataPoints().AppendEmpty()
		d.SetTimestamp(ts)
		d.SetDoubleValue(0.99) // decoder: not drawn
		d.Attributes().PutStr(attrGPUTask, "decoder")
		p := pg.DataPoints().AppendEmpty()
		p.SetTimestamp(ts)
		p.SetDoubleValue(f.power[i])
	}
	md2 := mem.SetEmptyGauge().DataPoints().AppendEmpty()
	md2.SetTimestamp(at(1))
	md2.SetIntValue(int64(f.memUsed))
	ml := lim.SetEmptyGauge().DataPoints().AppendEmpty()
	ml.SetTimestamp(at(1))
	ml.SetIntValue(int64(f.memLimit))
	return md
}
