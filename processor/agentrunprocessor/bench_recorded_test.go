// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// firstTurn is the recording's requests cut to its first trace: one agent
// run with its engine requests, as they arrived.
func firstTurn(rec agentrecording.Recording) []ptrace.Traces {
	first := rec.Batches[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	var out []ptrace.Traces
	for _, b := range rec.Batches {
		td := ptrace.NewTraces()
		b.CopyTo(td)
		td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(s ptrace.Span) bool { return s.TraceID() != first })
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
		if td.SpanCount() > 0 {
			out = append(out, td)
		}
	}
	return out
}

// BenchmarkAgentRunInput is BenchmarkAgentRun's measure (one whole run a
// loop, every run in its own trace, released at once, the parts as the
// privacy and inference processors leave them) on the hand-built semconv
// turn and on each real recording's first turn, so the figure measured on
// the hand-built layout can be held against a real SDK's. Compare with
//
//	benchstat -col /input
func BenchmarkAgentRunInput(b *testing.B) {
	inputs := []struct {
		name  string
		parts []ptrace.Traces
	}{{name: "semconv-fixture"}}
	for _, f := range []string{"agents_semconv_turn1_vllm", "agents_semconv_turn1_a", "agents_semconv_turn1_b"} {
		inputs[0].parts = append(inputs[0].parts, normalized(b, readBatch(b, f)))
	}
	for _, rec := range loadRecordings(b) {
		var parts []ptrace.Traces
		for _, td := range firstTurn(rec) {
			parts = append(parts, normalized(b, td))
		}
		inputs = append(inputs, struct {
			name  string
			parts []ptrace.Traces
		}{rec.SDK, parts})
	}
	for _, in := range inputs {
		spans := 0
		for _, p := range in.parts {
			spans += p.SpanCount()
		}
		b.Run("input="+in.name, func(b *testing.B) {
			cfg := agentGoldenConfig()
			cfg.Agents.Wait, cfg.Agents.EngineWait = 0, 0
			tp, err := NewFactory().CreateTraces(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
			require.NoError(b, err)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				for _, part := range in.parts {
					td := ptrace.NewTraces()
					part.CopyTo(td)
					retrace(td, i)
					if err := tp.ConsumeTraces(b.Context(), td); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			require.NoError(b, tp.Shutdown(b.Context()))
		})
	}
}

// retrace gives every span of td a trace id of run i's own.
func retrace(td ptrace.Traces, i int) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				tid := s.TraceID()
				tid[0], tid[1], tid[2] = byte(i), byte(i>>8), byte(i>>16)
				s.SetTraceID(pcommon.TraceID(tid))
			}
		}
	}
}
