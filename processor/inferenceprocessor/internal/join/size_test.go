// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package join

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkStageRecordBytes measures the live heap one waiting stage record
// costs the table (a PD request's prefill_waiting whose root is still in
// decode), the figure docs/deployment.md sizes a gateway's join window by:
// go test -run '^$' -bench StageRecordBytes ./processor/inferenceprocessor/internal/join/
func BenchmarkStageRecordBytes(b *testing.B) {
	const n = 100000
	now := time.Now()
	var perRecord float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t := New(Settings{Wait: 3 * time.Second, StageTTL: 5 * time.Minute, MaxEntries: 2 * n})
		for i := range n {
			var tid pcommon.TraceID
			binary.BigEndian.PutUint64(tid[8:], uint64(i)+1)
			t.AddStage(tid, PrefillWaiting, 0.02, pcommon.NewTimestampFromTime(now), now)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if t.Len() != n {
			b.Fatalf("table holds %d records, want %d", t.Len(), n)
		}
		perRecord = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(t)
	}
	b.ReportMetric(perRecord, "B/record")
}

// BenchmarkPhaseJoinBytes measures the live heap the cross-batch phase join
// costs per request: a record (engine phase spans before their request
// span) or a held set of three synthetic phase spans with their resource
// and scope (the request span first, once an engine has written phase
// spans), the figure the processor README states:
// go test -run '^$' -bench PhaseJoinBytes ./processor/inferenceprocessor/internal/join/
func BenchmarkPhaseJoinBytes(b *testing.B) {
	const n = 100000
	now := time.Now()
	for _, kind := range []string{"record", "held"} {
		b.Run(kind, func(b *testing.B) {
			var per float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				t := New(Settings{Wait: 3 * time.Second, StageTTL: 5 * time.Minute, MaxEntries: 2 * n})
				for i := range n {
					var tid pcommon.TraceID
					binary.BigEndian.PutUint64(tid[8:], uint64(i)+1)
					if kind == "record" {
						t.EnginePhases(tid, pcommon.SpanID{7: 1}, now)
						continue
					}
					t.HoldPhases(tid, pcommon.SpanID{7: 1}, phaseSet(tid), now)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if t.Len() != n {
					b.Fatalf("table holds %d, want %d", t.Len(), n)
				}
				per = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(t)
			}
			b.ReportMetric(per, "B/request")
		})
	}
}

// phaseSet is what the processor holds for one request: a resource with a
// service name, a scope, and three spans with one attribute each.
func phaseSet(tid pcommon.TraceID) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm.llm_engine")
	for i, name := range []string{"queue", "prefill", "decode"} {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(tid)
		s.SetSpanID(pcommon.SpanID{0: byte(i + 1)})
		s.SetParentSpanID(pcommon.SpanID{7: 1})
		s.SetName(name)
		s.Attributes().PutBool("inferprof.synthetic", true)
	}
	return td
}
