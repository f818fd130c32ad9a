// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

// vllmBatch returns n vLLM request spans in one batch, built from the
// vllm_basic fixture with distinct ids.
func vllmBatch(b *testing.B, n int) ptrace.Traces {
	b.Helper()
	tmpl := readBatch(b, "vllm_basic")
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	tmpl.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	src := tmpl.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	for i := range n {
		s := ss.Spans().AppendEmpty()
		src.CopyTo(s)
		s.SetTraceID(pcommon.TraceID{0: byte(i), 1: byte(i >> 8), 15: 1})
		s.SetSpanID(pcommon.SpanID{0: byte(i), 1: byte(i >> 8), 7: 1})
	}
	return td
}

// BenchmarkProcessor measures the processor on batches of vLLM request
// spans. mode=copy is the baseline (the per-iteration copy of the batch
// that every mode pays, since the processor mutates its input); off and
// on are the processor with phase spans off and on; scan is the copy plus
// the per-scope look for engine-written phase spans (anyEnginePhase) that
// on pays, to set it against on. armed is on after the processor has seen
// an engine write its own phase spans: each request's synthetic phase spans
// are held in the join and, as no engine phase span comes for them, released
// by the join's tick (run after each batch, at a time past the wait), the
// worst case of the cross-batch phase join. Compare with
//
//	benchstat -col /mode
func BenchmarkProcessor(b *testing.B) {
	for _, n := range []int{100, 1000} {
		batch := vllmBatch(b, n)
		for _, mode := range []string{"copy", "scan", "off", "on", "armed"} {
			b.Run(fmt.Sprintf("spans=%d/mode=%s", n, mode), func(b *testing.B) {
				cfg := createDefaultConfig().(*Config)
				cfg.PhaseSpans = mode == "on" || mode == "armed"
				p, tp, err := newTraces(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
				require.NoError(b, err)
				if mode == "armed" {
					p.join.SawPhases()
				}
				b.ReportAllocs()
				td := ptrace.NewTraces()
				for b.Loop() {
					td = ptrace.NewTraces()
					batch.CopyTo(td)
					if mode == "scan" {
						spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
						if anyEnginePhase(spans, spans.Len()) {
							b.Fatal("no engine phase span in the batch")
						}
						continue
					}
					if mode != "copy" {
						if err := tp.ConsumeTraces(b.Context(), td); err != nil {
							b.Fatal(err)
						}
						if mode == "armed" {
							p.expire(b.Context(), p.now().Add(time.Hour))
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
				require.NoError(b, tp.Shutdown(b.Context()))
			})
		}
	}
}
