// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

// benchStepBatch is n engine.step spans as the engine_step receiver makes them
// (wire version 4), each giving 16 requests a token.
func benchStepBatch(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr(names.ResourceServiceName, "vllm")
	ra.PutStr(names.ResourceHostName, "bench-node")
	ra.PutInt(names.ResourceProcessPID, 4242)
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	t0 := int64(1_700_000_000_000_000_000)
	for i := range n {
		s := ss.AppendEmpty()
		s.SetName(names.SpanEngineStep)
		s.SetTraceID(pcommon.TraceID{byte(i), 1})
		s.SetSpanID(pcommon.SpanID{byte(i), 1})
		start := t0 + int64(i)*5_000_000
		s.SetStartTimestamp(pcommon.Timestamp(start))
		s.SetEndTimestamp(pcommon.Timestamp(start + 4_000_000))
		a := s.Attributes()
		a.PutInt(names.AttrStepIndex, int64(i+1))
		a.PutInt(names.AttrStepBatch, int64(i+1))
		a.PutInt(names.AttrStepPrefillReqs, 1)
		a.PutInt(names.AttrStepDecodeReqs, 15)
		a.PutInt(names.AttrStepScheduledToks, 512)
		a.PutInt(names.AttrStepRunningReqs, 16)
		a.PutInt(names.AttrStepWaitingReqs, 2)
		a.PutDouble(names.AttrStepKVCacheUsage, 0.4)
		ids, toks := a.PutEmptySlice(names.AttrStepRequestIDs), a.PutEmptySlice(names.AttrStepRequestTokens)
		for r := range 16 {
			ids.AppendEmpty().SetStr("req-" + strconv.Itoa(r))
			toks.AppendEmpty().SetInt(1)
		}
		a.PutEmptySlice(names.AttrStepLaunchStarts).AppendEmpty().SetInt(start)
		a.PutEmptySlice(names.AttrStepLaunchEnds).AppendEmpty().SetInt(start + 3_000_000)
		a.PutEmptySlice(names.AttrStepLaunchThreads).AppendEmpty().SetInt(4242)
	}
	return td
}

// BenchmarkEngineSteps is the per-step path: the step window and the GPU
// join (no CUPTI stream, so each step passes marked no_source), copy of the
// batch included.
func BenchmarkEngineSteps(b *testing.B) {
	const n = 64
	batch := benchStepBatch(n)
	cfg := createDefaultConfig().(*Config)
	_, tp, err := newTraces(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(b, err)
	require.NoError(b, tp.Start(b.Context(), componenttest.NewNopHost()))
	b.ReportAllocs()
	var base int64
	for b.Loop() {
		td := ptrace.NewTraces()
		batch.CopyTo(td)
		// Each round's steps follow the last one's, as an engine's do.
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := range spans.Len() {
			s := spans.At(i)
			s.Attributes().PutInt(names.AttrStepIndex, base+int64(i)+1)
			s.SetStartTimestamp(s.StartTimestamp() + pcommon.Timestamp(base*5_000_000))
			s.SetEndTimestamp(s.EndTimestamp() + pcommon.Timestamp(base*5_000_000))
		}
		base += n
		if err := tp.ConsumeTraces(b.Context(), td); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/step")
	require.NoError(b, tp.Shutdown(b.Context()))
}
