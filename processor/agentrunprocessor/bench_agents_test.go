// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/spanfixture"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/privacyprocessor"
)

// plainBatch is n spans no engine or GenAI instrumentation wrote: an HTTP
// service's server and client spans with the old HTTP semconv attributes,
// two per trace.
func plainBatch(n int) ptrace.Traces {
	b := spanfixture.NewBatch("opentelemetry.instrumentation.httpx", "service.name", "web", "telemetry.sdk.language", "python")
	for i := range n {
		trace := pcommon.TraceID{0: byte(i / 2), 1: byte(i / 512), 15: 1}.String()
		id := pcommon.SpanID{0: byte(i), 1: byte(i >> 8), 7: 1}.String()
		parent := ""
		kind := ptrace.SpanKindServer
		if i%2 == 1 {
			parent = pcommon.SpanID{0: byte(i - 1), 1: byte((i - 1) >> 8), 7: 1}.String()
			kind = ptrace.SpanKindClient
		}
		s := b.Span("GET /items", kind, trace, id, parent, spanfixture.NS(spanfixture.T0), spanfixture.NS(spanfixture.T0+0.01))
		spanfixture.Put(s.Attributes(), "http.method", "GET", "http.url", "http://items/v1", "http.status_code", 200,
			"http.scheme", "http", "net.peer.name", "items", "net.peer.port", 8080, "http.flavor", "1.1", "http.user_agent", "x")
	}
	return b.Traces()
}

// BenchmarkNonAgentSpans measures spans no engine or GenAI instrumentation
// wrote, the processor's per-span cost for the rest of an application's
// traffic, with the agent assembly on (the default) and off. Compare with
//
//	benchstat -col /agents
func BenchmarkNonAgentSpans(b *testing.B) {
	const n = 1000
	batch := plainBatch(n)
	for _, agents := range []string{"off", "on"} {
		b.Run(fmt.Sprintf("spans=%d/agents=%s", n, agents), func(b *testing.B) {
			cfg := createDefaultConfig().(*Config)
			cfg.Agents.Enabled = agents == "on"
			tp, err := NewFactory().CreateTraces(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				td := ptrace.NewTraces()
				batch.CopyTo(td)
				if err := tp.ConsumeTraces(b.Context(), td); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
			require.NoError(b, tp.Shutdown(b.Context()))
		})
	}
}

// BenchmarkAgentRun measures the assembly on whole agent runs: the
// semconv fixture's first turn (13 spans with the engine's, as the privacy
// and inference processors leave them, made once outside the loop), every
// run in its own trace, released at once (wait 0).
func BenchmarkAgentRun(b *testing.B) {
	var parts []ptrace.Traces
	for _, f := range []string{"agents_semconv_turn1_vllm", "agents_semconv_turn1_a", "agents_semconv_turn1_b"} {
		parts = append(parts, normalized(b, readBatch(b, f)))
	}
	cfg := agentGoldenConfig()
	cfg.Agents.Wait, cfg.Agents.EngineWait = 0, 0
	tp, err := NewFactory().CreateTraces(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(b, err)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		for _, part := range parts {
			td := ptrace.NewTraces()
			part.CopyTo(td)
			// A trace id of its own per run.
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						tid := s.TraceID()
						tid[0], tid[1], tid[2] = byte(i), byte(i>>8), byte(i>>16)
						s.SetTraceID(tid)
					}
				}
			}
			if err := tp.ConsumeTraces(b.Context(), td); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/run")
	require.NoError(b, tp.Shutdown(b.Context()))
}

// normalized is td as the privacy and inference processors pass it on.
func normalized(tb testing.TB, td ptrace.Traces) ptrace.Traces {
	tb.Helper()
	sink := new(consumertest.TracesSink)
	inf := inferenceprocessor.NewFactory()
	ip, err := inf.CreateTraces(tb.Context(), processortest.NewNopSettings(inf.Type()), inf.CreateDefaultConfig(), sink)
	require.NoError(tb, err)
	pf := privacyprocessor.NewFactory()
	pp, err := pf.CreateTraces(tb.Context(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), ip)
	require.NoError(tb, err)
	require.NoError(tb, pp.ConsumeTraces(tb.Context(), td))
	require.NoError(tb, ip.Shutdown(tb.Context()))
	require.Len(tb, sink.AllTraces(), 1)
	return sink.AllTraces()[0]
}
