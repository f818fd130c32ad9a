// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire/cuptiwiretest"
)

func nativeDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "native", "cupti")
}

// TestCEncodedFramesDecode builds the C encoder and transport
// (native/cupti/ipc_client.c) with a small driver, lets it stream to a real
// Unix socket, and decodes the stream here, checking every field.
func TestCEncodedFramesDecode(t *testing.T) {
	t.Parallel()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed")
	}
	dir := nativeDir(t)
	bin := filepath.Join(t.TempDir(), "emit_frames")
	build := exec.Command(cc, "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-o", bin,
		filepath.Join(dir, "tests", "emit_frames.c"), filepath.Join(dir, "ipc_client.c"))
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	sockDir, err := os.MkdirTemp("", "ipcgo")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	path := filepath.Join(sockDir, "c.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer ln.Close()

	const n = 5000 // several 64 KiB batches, so frames span buffers
	run := exec.Command(bin, path, "5000")
	runOut := make(chan []byte, 1)
	runErr := make(chan error, 1)
	go func() {
		o, err := run.CombinedOutput()
		runOut <- o
		runErr <- err
	}()
	conn, err := ln.Accept()
	require.NoError(t, err)
	defer conn.Close()

	var c graphing
	require.NoError(t, NewDecoder(bufio.NewReader(conn), &c).Run())
	require.NoError(t, <-runErr, "%s", <-runOut)

	assert.Equal(t, uint32(4242), c.hello.PID)
	assert.Equal(t, "emit-host", c.host)
	assert.Equal(t, uint64(1700000000000000000), c.hello.StartUnixNS)
	require.Len(t, c.strings, 3, "each name crosses the wire once")
	require.Len(t, c.recs, n+4)
	want := []string{
		"_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE",
		"void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, int)",
		"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
	}
	for i := range n {
		r := c.recs[i]
		start := uint64(1700000000000000000) + uint64(i)*1000
		require.Equal(t, Record{
			Kind: RecordKindKernel, Device: uint16(i % 2), Stream: 7, Start: start, End: start + 100 + uint64(i%3),
			Name: r.Name, Correlation: uint32(i), GraphID: 9, GraphNode: 1000 + uint64(i),
		}, r, "record %d", i)
		require.Equal(t, want[i%3], c.strings[r.Name], "record %d name", i)
	}
	assert.Equal(t, Record{Kind: RecordKindMemcpy, Sub: 1, Start: 10, End: 30, Bytes: 65536}, c.recs[n])
	assert.Equal(t, Record{Kind: RecordKindMemset, Sub: 3, Device: 1, Start: 40, End: 45, Bytes: 512}, c.recs[n+1])
	assert.Equal(t, Record{Kind: RecordKindSync, Sub: 3, Device: DeviceUnknown, Start: 50, End: 80}, c.recs[n+2])
	assert.Equal(t, Record{Kind: RecordKindGraph, Device: 1, Stream: 9, Start: 90, End: 190, Correlation: 12, GraphID: 4}, c.recs[n+3])
	// The nodes emit_frames.c gives its graph, and the signature
	// Graphsignal's profiler computes from them.
	nodes := []cuptiwiretest.Node{{Type: 0, Symbol: "triton_poi_fused_add_cos_sin_0"}, {Type: 2}, {Type: 0, Symbol: "k_b"},
		{Type: 0, Symbol: "k"}, {Type: 0, Symbol: "triton_poi_fused_add_cos_sin_0"}, {Type: 5}, {Type: 0}, {Type: 13},
		{Type: 0, Symbol: "_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE"}, {Type: 2}}
	graph := Graph{GraphID: 3, ExecID: 4, Nodes: uint32(len(nodes)), Flags: GraphFlagNamesMissing}
	graph.Signature, _ = cuptiwiretest.GraphsignalSignature(nodes)
	require.Equal(t, []Graph{graph}, c.graphs, "the graph frame precedes its record, with Graphsignal's signature")
	require.NotEmpty(t, c.stats)
	last := c.stats[len(c.stats)-1]
	assert.Zero(t, last.DroppedRecords)
	assert.Equal(t, uint64(3), last.PoolExhausted)
	assert.Equal(t, uint64(2), last.GraphTableResets)
	assert.Zero(t, c.hello.Flags)
	require.NotEmpty(t, c.live)
	assert.Equal(t, Liveness{LastBufferUnixNS: 1700000000000000001, Launches: 77, BuffersCompleted: 5, FreeBuffers: 6,
		TotalBuffers: 8, State: LiveEnabled, Resumes: 1, CUPTIVersion: 24}, c.live[len(c.live)-1])
	require.NotEmpty(t, c.clocks)
	assert.Equal(t, Clock{OffsetNS: -42, ErrorNS: 300, SampledUnixNS: 1700000000000000002}, c.clocks[len(c.clocks)-1])
}
