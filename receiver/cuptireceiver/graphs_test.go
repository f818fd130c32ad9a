// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadatatest"
)

// graphTotals sums graph launch duration (ns) and count per signature over
// everything the sink got.
func graphTotals(sink *consumertest.MetricsSink) (dur map[string]float64, count map[string]int64) {
	dur, count = map[string]float64{}, map[string]int64{}
	for _, md := range sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				m := ms.At(j)
				if m.Name() != names.MetricGraphDuration && m.Name() != names.MetricGraphCount {
					continue
				}
				dps := m.Sum().DataPoints()
				for k := 0; k < dps.Len(); k++ {
					dp := dps.At(k)
					sig, _ := dp.Attributes().Get(names.AttrCUDAGraphSignature)
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						count[sig.Str()] += dp.IntValue()
					} else {
						dur[sig.Str()] += dp.DoubleValue() * 1e9
					}
				}
			}
		}
	}
	return dur, count
}

func graphLaunch(id uint32, start, dur uint64) cuptiwire.Record {
	return cuptiwire.Record{Kind: cuptiwire.RecordKindGraph, Stream: 7, Start: start, End: start + dur, GraphID: id}
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	_, err := c.Write(b)
	require.NoError(t, err)
}

// Graph launches go up per signature; a second connection of the same
// process starts with no graph ids, so an id of the first connection is
// unknown there until its graph frame comes again.
func TestGraphSignaturesPerConnection(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	const t0 = uint64(1_700_000_000_000_000_000)
	first := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendHelloFlags(nil, 300, cuptiwire.HelloGraphMode, t0, "node-a")
	b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: 3, ExecID: 17, Signature: 0x9e3779b97f4a7c15, Nodes: 64})
	b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: 4, Signature: 0xff, Nodes: 2})
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{graphLaunch(3, t0, 1000), graphLaunch(17, t0+2000, 1500), graphLaunch(4, t0+4000, 40), graphLaunch(99, t0+5000, 7)})
	b = cuptiwire.AppendStats(b, cuptiwire.Stats{GraphTableResets: 2})
	write(t, first, b)
	require.Eventually(t, func() bool { _, n := graphTotals(h.sink); return n[unknownSig]+n[sigA]+n[sigB] == 4 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, first.Close())

	second := dial(t, h.cfg.Endpoint)
	b = cuptiwire.AppendHelloFlags(nil, 300, cuptiwire.HelloGraphMode, t0, "node-a")
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{graphLaunch(3, t0+9000, 11)}) // before its graph frame
	b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: 3, ExecID: 17, Signature: 0x9e3779b97f4a7c15, Nodes: 64})
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{graphLaunch(17, t0+10000, 500)})
	write(t, second, b)
	require.Eventually(t, func() bool { _, n := graphTotals(h.sink); return n[unknownSig]+n[sigA]+n[sigB] == 6 }, 5*time.Second, 5*time.Millisecond)

	dur, n := graphTotals(h.sink)
	assert.Equal(t, map[string]int64{sigA: 3, sigB: 1, unknownSig: 2}, n)
	assert.InDelta(t, 3000.0, dur[sigA], 1e-3)
	assert.InDelta(t, 40.0, dur[sigB], 1e-3)
	assert.InDelta(t, 18.0, dur[unknownSig], 1e-3, "id 99, and id 3 on the second connection before its frame")
	// The library's table resets, from its stats.
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_engine_graph_table_resets") == 2 }, 5*time.Second, 5*time.Millisecond)
	assert.Zero(t, h.counter(t, "receiver_cupti_graph_table_resets"))
}

const (
	sigA       = "9e3779b97f4a7c15"
	sigB       = "00000000000000ff"
	unknownSig = "unknown"
)

// A connection's table of graph ids holds 8192; a frame past that clears
// it, and its executable graph id, registered after its graph id, is the
// one that survives a reset between the two, as in Graphsignal's library.
func TestGraphIDTableResetKeepsTheExecID(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	c := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendHelloFlags(nil, 301, cuptiwire.HelloGraphMode, 0, "node-a")
	for id := range uint32(8191) {
		b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: id + 1, Signature: 1, Nodes: 1})
	}
	// The graph id fills the table; the exec id finds it full and clears it.
	b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: 10_000, ExecID: 10_001, Signature: 2, Nodes: 1})
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{graphLaunch(1, 100, 10), graphLaunch(10_000, 200, 20), graphLaunch(10_001, 300, 30)})
	write(t, c, b)
	require.Eventually(t, func() bool { _, n := graphTotals(h.sink); return n[unknownSig]+n["0000000000000002"] == 3 }, 5*time.Second, 5*time.Millisecond)
	dur, _ := graphTotals(h.sink)
	assert.InDelta(t, 30.0, dur["0000000000000002"], 1e-3)
	assert.InDelta(t, 30.0, dur[unknownSig], 1e-3, "ids before the reset, and the graph id cleared with them")
	metadatatest.AssertEqualReceiverCuptiGraphTableResets(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("graph id table full").Len(), "warned once")
}

// Past the receiver's bound on distinct signatures, a new signature's
// launches go up as unknown, counted, with one warning.
func TestGraphSignatureOverflowCounted(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	c := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendHelloFlags(nil, 302, cuptiwire.HelloGraphMode, 0, "node-a")
	const known = 1024 // aggregate.DefaultLimits.MaxSignatures
	for id := range uint32(known + 1) {
		b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: id + 1, Signature: uint64(id) + 1, Nodes: 1})
	}
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{graphLaunch(1, 100, 10), graphLaunch(known+1, 200, 20), graphLaunch(known+1, 300, 20)})
	write(t, c, b)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_graph_signature_overflow_records") == 2 }, 5*time.Second, 5*time.Millisecond)
	_, n := graphTotals(h.sink)
	assert.Equal(t, map[string]int64{fmt.Sprintf("%016x", 1): 1, unknownSig: 2}, n)
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("more distinct CUDA graph signatures").Len())
}

// In graph mode a graph's kernels come only as its launch record, so graph
// launches are sampled as spans too (for the timeline's GPU tracks): named
// cudaGraphLaunch, category cuda_graph, with the graph's signature.
func TestGraphLaunchSpans(t *testing.T) {
	t.Parallel()
	spans := new(consumertest.TracesSink)
	h := startWithSpans(t, func(c *Config) {
		c.Spans = SpansConfig{Enabled: true, SamplingRatio: 1, MaxPerInterval: 100}
	}, spans)
	const t0 = uint64(1_700_000_000_000_000_000)
	c := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendHelloFlags(nil, 301, cuptiwire.HelloGraphMode, t0, "node-a")
	b = cuptiwire.AppendString(b, 1, "void vllm::rms_norm_kernel<float>(float*)")
	b = cuptiwire.AppendGraph(b, cuptiwire.Graph{GraphID: 3, ExecID: 17, Signature: 0x9e3779b97f4a7c15, Nodes: 64})
	eager := cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Stream: 7, Start: t0 + 100, End: t0 + 150, Name: 1, Correlation: 5}
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{graphLaunch(17, t0, 1000), eager, graphLaunch(99, t0+2000, 40)})
	write(t, c, b)
	require.Eventually(t, func() bool { return spans.SpanCount() == 3 }, 5*time.Second, 5*time.Millisecond)

	got := map[string][3]string{} // span name and signature → name, category, signature
	for _, td := range spans.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < ss.Len(); j++ {
				sp := ss.At(j)
				a := sp.Attributes()
				kn, _ := a.Get(names.AttrKernelName)
				cat, _ := a.Get(names.AttrKernelCategory)
				sig, _ := a.Get(names.AttrCUDAGraphSignature)
				gid, _ := a.Get(names.AttrCUDAGraphID)
				got[fmt.Sprintf("%s/%d/%d", sp.Name(), gid.Int(), sp.EndTimestamp()-sp.StartTimestamp())] = [3]string{kn.Str(), cat.Str(), sig.Str()}
			}
		}
	}
	assert.Equal(t, map[string][3]string{
		"cudaGraphLaunch/17/1000":    {"cudaGraphLaunch", "cuda_graph", sigA},
		"cudaGraphLaunch/99/40":      {"cudaGraphLaunch", "cuda_graph", unknownSig},
		"vllm::rms_norm_kernel/0/50": {"vllm::rms_norm_kernel", "normalization", ""},
	}, got)
}
