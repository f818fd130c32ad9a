// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/cuptiwire/cuptiwiretest"
	"github.com/inferprof/inferprof/internal/e2etest"
)

const graphsConfig = `
receivers:
  cupti:
    endpoint: {{.Dir}}/cupti.sock
    collection_interval: 200ms
exporters:
  graphsignal:
    api_key: graphs-key
    endpoint: ${env:GRAPHSIGNAL_ENDPOINT}
    local:
      endpoint: ""
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [cupti]
      exporters: [graphsignal]
`

// TestGraphsignalGraphSignaturesEndToEnd: a CUPTI connection in graph mode
// sends graph frames and graph launch records, as the injection library
// does, into the built collector; the fake Graphsignal decodes
// cuda_graphs_nanoseconds with one frame per signature, named as
// Graphsignal's own profiler names it, and "unknown" for launches of graphs
// the connection never described. A reconnect starts with no graph ids.
func TestGraphsignalGraphSignaturesEndToEnd(t *testing.T) {
	// Two decode graphs as vLLM captures them (symbols of the kernels in
	// native/cupti/tests/emit_frames.c): one registered under its graph id
	// and its executable graph id, one under its graph id only (a CUPTI
	// without cuptiGetGraphExecId).
	sigA, hexA := cuptiwiretest.GraphsignalSignature([]cuptiwiretest.Node{
		cuptiwiretest.Kernel("_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE"),
		cuptiwiretest.Kernel("_ZN4vllm15rms_norm_kernelIN3c108BFloat16ELi8EEEvPT_PKS3_S6_fii"),
		cuptiwiretest.Kernel("_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE"),
		cuptiwiretest.Typed("memset"),
	})
	sigB, hexB := cuptiwiretest.GraphsignalSignature([]cuptiwiretest.Node{
		cuptiwiretest.Kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), cuptiwiretest.Typed("empty"), cuptiwiretest.Typed("memcpy"),
	})
	require.NotEqual(t, hexA, hexB)
	graphA := cuptiwire.Graph{GraphID: 3, ExecID: 17, Signature: sigA, Nodes: 4}
	graphB := cuptiwire.Graph{GraphID: 4, Signature: sigB, Nodes: 3}

	srv := graphsignaltest.NewServer(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700)) // the cupti socket's folder must be owner-only
	cfg := e2etest.Render(t, e2etest.NewPorts(t), dir, graphsConfig)
	e2etest.Start(t, e2etest.Options{Config: cfg, Env: []string{"GRAPHSIGNAL_ENDPOINT=" + srv.URL}})
	sock := filepath.Join(dir, "cupti.sock")

	want := map[string][2]uint64{}
	t0 := uint64(time.Now().UnixNano())
	// launch is a graph record; frame is the frame it must land in.
	launch := func(id uint32, at, dur uint64, frame string) cuptiwire.Record {
		w := want[frame]
		want[frame] = [2]uint64{w[0] + dur, w[1] + 1}
		return cuptiwire.Record{Kind: cuptiwire.RecordKindGraph, Stream: 7, Start: t0 + at, End: t0 + at + dur, GraphID: id, Correlation: uint32(at)}
	}
	send := func(c net.Conn, b []byte) {
		t.Helper()
		_, err := c.Write(b)
		require.NoError(t, err)
	}
	hello := func() []byte {
		return cuptiwire.AppendHelloFlags(nil, 5150, cuptiwire.HelloGraphMode, t0, "e2e-gpu-node")
	}

	first, err := net.Dial("unix", sock)
	require.NoError(t, err)
	b := cuptiwire.AppendGraph(cuptiwire.AppendGraph(hello(), graphA), graphB)
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{
		launch(3, 0, 1_000_250, hexA), launch(17, 2_000_000, 1_500_125, hexA),
		launch(4, 4_000_000, 40_000, hexB), launch(99, 5_000_000, 7_000, "unknown"),
	})
	send(first, b)
	// The second batch goes up in a later upload.
	require.Eventually(t, func() bool { return srv.Profile("cuda_graphs_nanoseconds")[hexA][1] == 2 }, 60*time.Second, 50*time.Millisecond)
	send(first, cuptiwire.AppendRecords2(nil, []cuptiwire.Record{
		launch(17, 10_000_000, 2_500_000, hexA), launch(3, 13_000_000, 300_001, hexA),
		launch(4, 14_000_000, 60_000, hexB), launch(99, 15_000_000, 13_000, "unknown"),
	}))
	require.NoError(t, first.Close())

	// The library reconnects: its ids mean nothing on the new connection
	// until it describes the graphs again.
	second, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer second.Close()
	b = cuptiwire.AppendRecords2(hello(), []cuptiwire.Record{launch(4, 20_000_000, 11_000, "unknown")})
	b = cuptiwire.AppendGraph(b, graphB)
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{launch(4, 21_000_000, 500_000, hexB), launch(17, 22_000_000, 9_000, "unknown")})
	send(second, b)

	var launches uint64
	for _, w := range want {
		launches += w[1]
	}
	require.Eventually(t, func() bool {
		var n uint64
		for _, v := range srv.Profile("cuda_graphs_nanoseconds") {
			n += v[1]
		}
		return n == launches
	}, 60*time.Second, 50*time.Millisecond, "every launch uploaded")
	require.Empty(t, srv.Malformed(), "every upload decodes with Graphsignal's schema")
	assert.Equal(t, want, srv.Profile("cuda_graphs_nanoseconds"), "per frame: the launches' GPU time in ns and their count")
	assert.Len(t, want, 3, "one frame per signature, and unknown")

	var modes []float64
	for _, u := range srv.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			if m.GetName() == "cuda_graph_trace_mode" {
				for _, dp := range m.Datapoints {
					modes = append(modes, dp.GetGauge())
				}
			}
		}
	}
	require.NotEmpty(t, modes)
	for _, v := range modes {
		assert.InDelta(t, 0.0, v, 0, "graph mode")
	}
}
