// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// BenchmarkFlush is one flush of a busy interval: 8 devices × 64 kernels,
// plus memcpy, the flush path continueStarts adds to. It is not the record
// hot path (BenchmarkDecodeAggregate).
func BenchmarkFlush(b *testing.B) {
	a := newAgg(b, 30, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	k := []uint32{0}
	for i := range 64 {
		k = append(k, a.Kernel(fmt.Appendf(nil, "kernel_%d", i)))
	}
	var recs []cuptiwire.Record
	for d := range uint16(8) {
		for i := range 64 {
			s := uint64(i) * 1000
			recs = append(recs, cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Device: d, Name: uint32(i + 1), Start: s, End: s + 500})
		}
		recs = append(recs, cuptiwire.Record{Kind: cuptiwire.RecordKindMemcpy, Device: d, Start: 1, End: 2, Bytes: 64})
	}
	c := NewCache()
	now := pcommon.Timestamp(1_700_000_000_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		a.Add(src, recs, k, c)
		now += 1e9
		if a.Flush(now).DataPointCount() == 0 {
			b.Fatal("empty flush")
		}
	}
}
