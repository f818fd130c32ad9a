// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package join

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
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
