// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadata"
	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"
	"github.com/inferprof/inferprof/internal/names"
)

// kernelBatch is n kernel spans in the cupti receiver's shape and a
// request, as a traces/kernels pipeline hands them on.
func kernelBatch(n int, t0 time.Time) ptrace.Traces {
	td := requestSpans(t0)
	ks := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := range n {
		sp := ks.AppendEmpty()
		sp.SetName("sm90_xmma_gemm_bf16bf16")
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 1})
		start := t0.Add(time.Duration(i) * 20 * time.Microsecond)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(15 * time.Microsecond)))
		sp.Attributes().PutStr(names.AttrKernelName, "sm90_xmma_gemm_bf16bf16")
		sp.Attributes().PutStr(names.AttrKernelCategory, "gemm")
		sp.Attributes().PutStr(names.AttrDeviceID, "0")
	}
	return td
}

// BenchmarkConsumeTraces compares the exporter's ConsumeTraces (the
// per-span path moved out of the graphsignal exporter, now behind
// exporterhelper) with feeding the same timeline store directly, as the
// graphsignal exporter did.
func BenchmarkConsumeTraces(b *testing.B) {
	t0 := time.Now()
	for _, n := range []int{1000, 10000} {
		td := kernelBatch(n, t0)
		spans := td.SpanCount()
		b.Run("impl=baseline/spans="+strconv.Itoa(spans), func(b *testing.B) {
			s := timeline.New(16<<20, time.Hour, time.Now)
			b.ReportAllocs()
			for b.Loop() {
				s.Apply(timeline.Collect(td, nil))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
		})
		b.Run("impl=exporter/spans="+strconv.Itoa(spans), func(b *testing.B) {
			cfg := testConfig()
			cfg.Timeline.MemoryLimitMiB = 16
			exp, err := NewFactory().CreateTraces(b.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := exp.Start(b.Context(), componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = exp.Shutdown(context.Background()) }()
			b.ReportAllocs()
			for b.Loop() {
				if err := exp.ConsumeTraces(b.Context(), td); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
		})
	}
}
