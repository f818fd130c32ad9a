// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// benchRecords is a decode-like mix: 64 distinct kernels on 2 devices with
// a memcpy every 16 records, as vLLM's decode steps produce.
func benchRecords(n int) []cuptiwire.Record {
	recs := make([]cuptiwire.Record, n)
	t := uint64(1_700_000_000_000_000_000)
	for i := range recs {
		r := cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Device: uint16(i % 2), Stream: 7, Start: t, End: t + 3000, Name: uint32(1 + i%64), Correlation: uint32(i)}
		if i%16 == 15 {
			r = cuptiwire.Record{Kind: cuptiwire.RecordKindMemcpy, Sub: 1, Device: uint16(i % 2), Start: t, End: t + 800, Bytes: 4096}
		}
		recs[i] = r
		t += 4000
	}
	return recs
}

func benchName(i int) string {
	return fmt.Sprintf("void vllm::kernel_family_%d<c10::BFloat16, %d>(c10::BFloat16*, int)", i, i)
}

// The same records as Kineto JSON events, the form torch.profiler writes.
func kinetoJSON(recs []cuptiwire.Record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"traceEvents":[`)
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		cat, name := "kernel", benchName(int(r.Name-1))
		if r.Kind == cuptiwire.RecordKindMemcpy {
			cat, name = "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)"
		}
		nb, _ := json.Marshal(name)
		fmt.Fprintf(&b, `{"ph":"X","cat":%q,"name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{"device":%d,"context":1,"stream":%d,"correlation":%d,"bytes":%d,"registers per thread":32,"grid":[128,1,1],"block":[256,1,1]}}`,
			cat, nb, r.Device, r.Stream, strconv.FormatFloat(float64(r.Start)/1000, 'f', 3, 64),
			strconv.FormatFloat(float64(r.End-r.Start)/1000, 'f', 3, 64), r.Device, r.Stream, r.Correlation, r.Bytes)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

type jsonEvent struct {
	Ph   string  `json:"ph"`
	Cat  string  `json:"cat"`
	Name string  `json:"name"`
	Pid  int     `json:"pid"`
	Tid  int     `json:"tid"`
	Ts   float64 `json:"ts"`
	Dur  float64 `json:"dur"`
	Args struct {
		Device      int    `json:"device"`
		Stream      int    `json:"stream"`
		Correlation int    `json:"correlation"`
		Bytes       uint64 `json:"bytes"`
	} `json:"args"`
}

// BenchmarkDecodeAggregate measures decode plus aggregate of records frames
// (ours) against encoding/json decoding the same records in Kineto form
// (baseline). One op is one batch of `records` records.
func BenchmarkDecodeAggregate(b *testing.B) {
	for _, n := range []int{1024, 16384} {
		recs := benchRecords(n)
		b.Run(fmt.Sprintf("records=%d/impl=baseline", n), func(b *testing.B) {
			doc := kinetoJSON(recs)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var v struct {
					TraceEvents []jsonEvent `json:"traceEvents"`
				}
				if err := json.Unmarshal(doc, &v); err != nil {
					b.Fatal(err)
				}
				if len(v.TraceEvents) != n {
					b.Fatal("short decode")
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
		b.Run(fmt.Sprintf("records=%d/impl=ours", n), func(b *testing.B) {
			mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
			agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 30, mb, pcommon.Timestamp(0))
			prefix := cuptiwire.AppendHello(nil, 1, 0, "bench")
			for i := range 64 {
				prefix = cuptiwire.AppendString(prefix, uint32(i+1), benchName(i))
			}
			var body []byte
			for i := 0; i < n; i += 1024 { // the library sends frames of at most 1024 records
				body = cuptiwire.AppendRecords(body, recs[i:min(i+1024, n)])
			}
			h := &connHandler{agg: agg, ctx: context.Background()}
			r := bytes.NewReader(prefix)
			d := cuptiwire.NewDecoder(r, h)
			if err := d.Run(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r.Reset(body)
				if err := d.Run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
