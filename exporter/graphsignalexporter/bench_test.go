// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/proto"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
)

// benchMetrics is n datapoints as they reach push (after the delta step):
// a third gauges, a third delta counters, a third 10-bucket histograms, with
// the attributes an engine and a GPU carry.
func benchMetrics(n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "gpu-node-1")
	rm.Resource().Attributes().PutInt("process.pid", 4242)
	rm.Resource().Attributes().PutStr("service.name", "vllm")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	bounds := []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	g := ms.AppendEmpty()
	g.SetName("hw.gpu.utilization")
	gd := g.SetEmptyGauge().DataPoints()
	c := ms.AppendEmpty()
	c.SetName("gen_ai.server.request.count")
	cs := c.SetEmptySum()
	cs.SetIsMonotonic(true)
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	h := ms.AppendEmpty()
	h.SetName("gen_ai.server.time_to_first_token")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := 0; i < n; i++ {
		var attrs pcommon.Map
		switch i % 3 {
		case 0:
			dp := gd.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(float64(i))
			attrs = dp.Attributes()
		case 1:
			dp := cs.DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(float64(i))
			attrs = dp.Attributes()
		default:
			dp := hh.DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.ExplicitBounds().FromRaw(bounds)
			dp.BucketCounts().FromRaw([]uint64{0, 1, 4, 9, 3, 1, 0, 0, 1, 0, 0})
			dp.SetCount(19)
			dp.SetSum(4.2)
			dp.SetMin(0.02)
			dp.SetMax(7)
			attrs = dp.Attributes()
		}
		attrs.PutStr("gen_ai.request.model", "meta-llama/Llama-3.1-8B-Instruct")
		attrs.PutStr("hw.id", fmt.Sprint(i%8))
		attrs.PutInt("series", int64(i/3))
	}
	return md
}

// BenchmarkEncode compares one upload's encoding (Graphsignal mapping with
// its names, protobuf, gzip) with the otlp_http exporter's (pdata protobuf marshal,
// gzip through confighttp's klauspost/compress) for the same datapoints.
func BenchmarkEncode(b *testing.B) {
	for _, n := range []int{99, 999} {
		md := benchMetrics(n)
		b.Run(fmt.Sprintf("impl=baseline/points=%d", n), func(b *testing.B) {
			m := &pmetric.ProtoMarshaler{}
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				raw, err := m.MarshalMetrics(md)
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				zw.Reset(&buf)
				_, _ = zw.Write(raw)
				_ = zw.Close()
				size = buf.Len()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/datapoint")
			b.ReportMetric(float64(size), "bytes/upload")
		})
		b.Run(fmt.Sprintf("impl=ours/points=%d", n), func(b *testing.B) {
			enc := encode.New(nil, map[string]string{"deployment": "bench"}, "0123456789ab", time.Now,
				encode.WithNames(encode.NamesGraphsignal))
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				req, _ := enc.Metrics(md)
				raw, err := proto.Marshal(req)
				if err != nil {
					b.Fatal(err)
				}
				// The same gzip confighttp applies to both exporters' bodies.
				buf.Reset()
				zw.Reset(&buf)
				_, _ = zw.Write(raw)
				_ = zw.Close()
				size = buf.Len()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/datapoint")
			b.ReportMetric(float64(size), "bytes/upload")
		})
	}
}
