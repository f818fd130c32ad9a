// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// benchBatch is one flush of a busy engine: kernels kernel spans (the cupti
// receiver's shape), steps engine.step spans and a tenth as many requests.
func benchBatch(kernels, steps int) ptrace.Traces {
	td := ptrace.NewTraces()
	t0 := base.UnixNano()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceHostName, "gpu-node-1")
	rs.Resource().Attributes().PutInt(names.ResourceProcessPID, 4242)
	ks := rs.ScopeSpans().AppendEmpty().Spans()
	kernelNames := []string{"flash::flash_fwd_kernel", "sm90_xmma_gemm_bf16bf16", "vllm::rms_norm_kernel", "vllm::act_and_mul_kernel"}
	for i := range kernels {
		sp := ks.AppendEmpty()
		name := kernelNames[i%len(kernelNames)]
		sp.SetName(name)
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 1})
		sp.SetStartTimestamp(pcommon.Timestamp(t0 + int64(i)*20_000))
		sp.SetEndTimestamp(pcommon.Timestamp(t0 + int64(i)*20_000 + 15_000))
		a := sp.Attributes()
		a.PutStr(names.AttrKernelName, name)
		a.PutStr(names.AttrKernelCategory, "gemm")
		a.PutStr(names.AttrDeviceID, "0")
		a.PutInt(attrStream, 7)
		a.PutInt(attrCorrelation, int64(i))
	}
	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	ss := rs2.ScopeSpans().AppendEmpty().Spans()
	for i := range steps {
		sp := ss.AppendEmpty()
		sp.SetName(names.SpanEngineStep)
		sp.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 2})
		sp.SetStartTimestamp(pcommon.Timestamp(t0 + int64(i)*10_000_000))
		sp.SetEndTimestamp(pcommon.Timestamp(t0 + int64(i)*10_000_000 + 8_000_000))
		a := sp.Attributes()
		a.PutInt(names.AttrStepIndex, int64(i))
		a.PutInt(names.AttrStepPrefillReqs, 1)
		a.PutInt(names.AttrStepDecodeReqs, 31)
		a.PutInt(names.AttrStepScheduledToks, 543)
		a.PutDouble(names.AttrStepKVCacheUsage, 0.4)
		ids := a.PutEmptySlice(names.AttrStepRequestIDs)
		for r := range 32 {
			ids.AppendEmpty().SetStr("cmpl-" + strconv.Itoa(r))
		}
	}
	for i := range steps / 10 {
		sp := ss.AppendEmpty()
		sp.SetName("llm_request")
		sp.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 3})
		sp.SetStartTimestamp(pcommon.Timestamp(t0))
		sp.SetEndTimestamp(pcommon.Timestamp(t0 + int64(i+1)*50_000_000))
		a := sp.Attributes()
		a.PutStr(names.AttrRequestID, "cmpl-"+strconv.Itoa(i))
		a.PutDouble(names.AttrE2E, float64(i+1)*0.05)
		a.PutDouble(names.AttrTimeToFirstToken, 0.01)
		gaps := a.PutEmptySlice(names.AttrITLGaps)
		for range 64 {
			gaps.AppendEmpty().SetDouble(0.01)
		}
	}
	return td
}

// BenchmarkIngest compares feeding the timeline (read the spans, keep
// them, evict the oldest past the budget) with a copy of the same batch,
// the least a consumer keeping spans pays.
func BenchmarkIngest(b *testing.B) {
	for _, kernels := range []int{1000, 10000} {
		td := benchBatch(kernels, 100)
		spans := td.SpanCount()
		b.Run("impl=baseline/spans="+strconv.Itoa(spans), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dst := ptrace.NewTraces()
				td.CopyTo(dst)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
		})
		b.Run("impl=timeline/spans="+strconv.Itoa(spans), func(b *testing.B) {
			s := New(16<<20, time.Hour, func() time.Time { return base })
			b.ReportAllocs()
			for b.Loop() {
				s.ConsumeTraces(td)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			one := New(1<<40, time.Hour, func() time.Time { return base })
			one.ConsumeTraces(td)
			b.ReportMetric(float64(one.Used())/float64(spans), "B/record")
		})
	}
}

// BenchmarkRender compares rendering a window as Chrome trace JSON with
// marshalling the same spans as OTLP JSON (what the file exporter writes).
func BenchmarkRender(b *testing.B) {
	td := benchBatch(10000, 100)
	s := New(1<<40, time.Hour, func() time.Time { return base })
	s.ConsumeTraces(td)
	from, to := base.UnixNano(), base.Add(time.Hour).UnixNano()
	b.Run("impl=baseline", func(b *testing.B) {
		var m ptrace.JSONMarshaler
		b.ReportAllocs()
		for b.Loop() {
			out, err := m.MarshalTraces(td)
			if err != nil || len(out) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=timeline", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := json.NewEncoder(&buf).Encode(Render(s.Snapshot(from, to))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len()), "bytes")
	})
}
