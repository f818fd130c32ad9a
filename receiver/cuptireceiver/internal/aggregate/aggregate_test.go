// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

func newAgg(t testing.TB, top int, limits Limits) *Aggregator {
	t.Helper()
	mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	return New(kernelclass.Default, limits, top, mb, pcommon.Timestamp(1))
}

// point is one flattened data point.
type point struct {
	metric string
	attrs  map[string]any
	value  float64
	res    map[string]any
}

func flatten(m pmetric.Metrics) []point {
	var out []point
	for i := 0; i < m.ResourceMetrics().Len(); i++ {
		rm := m.ResourceMetrics().At(i)
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				mt := ms.At(k)
				dps := mt.Sum().DataPoints()
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					out = append(out, point{mt.Name(), dp.Attributes().AsRaw(), v, rm.Resource().Attributes().AsRaw()})
				}
			}
		}
	}
	return out
}

func find(ps []point, metric string, attrs map[string]any) (float64, bool) {
	for _, p := range ps {
		if p.metric != metric {
			continue
		}
		match := true
		for k, v := range attrs {
			if p.attrs[k] != v {
				match = false
			}
		}
		if match {
			return p.value, true
		}
	}
	return 0, false
}

func TestTopKernelsAndOtherPerCategory(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 2, DefaultLimits)
	src, ok := a.Source(Source{Kind: SourceKindCUPTI, Host: "h", PID: 7})
	require.True(t, ok)
	ids := []uint32{
		0,
		a.Kernel([]byte("void flash::flash_fwd_kernel<1>(int)")),      // attention, 3000 ns
		a.Kernel([]byte("ampere_sgemm_128x64_tn")),                    // gemm, 2000 ns
		a.Kernel([]byte("void vllm::rms_norm_kernel<float>(float*)")), // normalization, 500 ns
		a.Kernel([]byte("void vllm::rms_norm_kernel<half>(half*)")),   // same short name and category
		a.Kernel([]byte("ampere_hgemm_64x64_nn")),                     // gemm, 100 ns
	}
	assert.Equal(t, ids[3], ids[4], "instantiations share a series")
	recs := []cuptiwire.Record{
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 1, Start: 0, End: 3000},
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 2, Start: 3000, End: 5000},
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 3, Start: 5000, End: 5300},
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 4, Start: 6000, End: 6200},
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 5, Start: 7000, End: 7100},
		{Kind: cuptiwire.RecordKindKernel, Device: 1, Name: 5, Start: 0, End: 50},
	}
	require.Zero(t, a.Add(src, recs, ids, NewCache()))
	ps := flatten(a.Flush(pcommon.Timestamp(10)))

	get := func(name, cat string, dev int64) float64 {
		v, ok := find(ps, names.MetricKernelDuration, map[string]any{names.AttrKernelName: name, names.AttrKernelCategory: cat, names.AttrCUDADeviceOrdinal: dev})
		require.True(t, ok, "%s/%s/%d", name, cat, dev)
		return v
	}
	assert.InDelta(t, 3000e-9, get("flash::flash_fwd_kernel", "attention", 0), 1e-15)
	assert.InDelta(t, 2000e-9, get("ampere_sgemm_128x64_tn", "gemm", 0), 1e-15)
	assert.InDelta(t, 500e-9, get("other", "normalization", 0), 1e-15)
	assert.InDelta(t, 100e-9, get("other", "gemm", 0), 1e-15)
	assert.InDelta(t, 50e-9, get("ampere_hgemm_64x64_nn", "gemm", 1), 1e-15, "device 1 has its own top list")
	n, ok := find(ps, names.MetricKernelCount, map[string]any{names.AttrKernelName: "other", names.AttrKernelCategory: "normalization"})
	require.True(t, ok)
	assert.Equal(t, 2.0, n)
	assert.Equal(t, map[string]any{
		"host.name": "h", "process.pid": int64(7), "inferprof.activity.source": "cupti",
		"inferprof.cupti.graph_mode": "node", "inferprof.cupti.sampled": false,
	}, ps[0].res)

	// Delta: the next flush starts from zero.
	assert.Zero(t, a.Flush(pcommon.Timestamp(20)).DataPointCount())
}

func TestBusyTimeIsTheUnion(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindKineto})
	k := []uint32{0, a.Kernel([]byte("k"))}
	recs := []cuptiwire.Record{
		{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 0, End: 100},
		{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 50, End: 150}, // overlaps: +50
		{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 60, End: 70},  // inside: +0
		{Kind: cuptiwire.RecordKindMemcpy, Sub: 1, Start: 200, End: 250, Bytes: 10},
		{Kind: cuptiwire.RecordKindSync, Sub: 3, Start: 300, End: 400}, // host wait: not busy
	}
	a.Add(src, recs, k, NewCache())
	ps := flatten(a.Flush(5))
	busy, ok := find(ps, "inferprof.gpu.busy.time", map[string]any{names.AttrCUDADeviceOrdinal: int64(0)})
	require.True(t, ok)
	assert.InDelta(t, 200e-9, busy, 1e-15)
	b, ok := find(ps, "inferprof.gpu.memcpy.bytes", map[string]any{"inferprof.gpu.memcpy.kind": "host_to_device"})
	require.True(t, ok)
	assert.Equal(t, 10.0, b)
	s, ok := find(ps, "inferprof.gpu.sync.duration", map[string]any{"inferprof.gpu.sync.kind": "stream"})
	require.True(t, ok)
	assert.InDelta(t, 100e-9, s, 1e-15)
	assert.Equal(t, "kineto", ps[0].res["inferprof.activity.source"])
}

func TestLimitsDropAndCount(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, Limits{MaxNames: 1, MaxSources: 1, MaxKeys: 1})
	src, ok := a.Source(Source{PID: 1})
	require.True(t, ok)
	_, ok = a.Source(Source{PID: 2})
	assert.False(t, ok, "source table full")
	first := a.Kernel([]byte("a"))
	assert.Equal(t, uint32(overflowSeries), a.Kernel([]byte("b")), "name table full maps to other")
	assert.NotEqual(t, first, a.Kernel([]byte("b")))
	dropped := a.Add(src, []cuptiwire.Record{
		{Kind: cuptiwire.RecordKindKernel, Name: 1, End: 1},
		{Kind: cuptiwire.RecordKindMemcpy, End: 1},
	}, []uint32{0, first}, NewCache())
	assert.Equal(t, 1, dropped)
	recs, drops := a.Stats()
	assert.Equal(t, uint64(1), recs)
	assert.Equal(t, uint64(1), drops)
}

func TestAddAllocatesNothing(t *testing.T) {
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{PID: 1})
	k := []uint32{0, a.Kernel([]byte("x")), a.Kernel([]byte("y"))}
	recs := make([]cuptiwire.Record, 512)
	for i := range recs {
		recs[i] = cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Name: uint32(1 + i%2), Device: uint16(i % 4), Start: uint64(i * 10), End: uint64(i*10 + 5)}
	}
	c := NewCache()
	a.Add(src, recs, k, c)
	assert.Zero(t, testing.AllocsPerRun(50, func() { a.Add(src, recs, k, c) }))
	// After a flush the slots are rebuilt from the same memory.
	a.Flush(2)
	a.Add(src, recs, k, c)
	a.Flush(3)
	assert.Zero(t, testing.AllocsPerRun(50, func() { a.Add(src, recs, k, c) }))
}

// Engines restart with new pids: a released source is forgotten after the
// flush that emitted its data, so the table never fills up.
func TestReleasedSourcesArePruned(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, Limits{MaxNames: 10, MaxSources: 2, MaxKeys: 100})
	k := []uint32{0, a.Kernel([]byte("k"))}
	for pid := range uint32(20) {
		src, ok := a.Source(Source{PID: pid})
		require.True(t, ok, "pid %d", pid)
		a.Add(src, []cuptiwire.Record{{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 1, End: 2}}, k, NewCache())
		a.Release(src)
		ps := flatten(a.Flush(pcommon.Timestamp(pid + 2)))
		require.NotEmpty(t, ps)
		assert.Equal(t, int64(pid), ps[0].res["process.pid"], "data emitted under its own pid before pruning")
		assert.Zero(t, a.Sources())
	}
	held, ok := a.Source(Source{PID: 100})
	require.True(t, ok)
	a.Flush(100)
	assert.Equal(t, 1, a.Sources(), "a held source stays")
	again, ok := a.Source(Source{PID: 100})
	require.True(t, ok)
	assert.Equal(t, held, again)
}

// The generated metric and attribute names are the shared ones in
// internal/names, which the graphsignal exporter reads.
func TestNamesMatchSharedConstants(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{PID: 1})
	k := []uint32{0, a.Kernel([]byte("k"))}
	a.Add(src, []cuptiwire.Record{
		{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 1, End: 2},
		{Kind: cuptiwire.RecordKindMemcpy, Start: 1, End: 2, Bytes: 1},
		{Kind: cuptiwire.RecordKindMemset, Start: 1, End: 2, Bytes: 1},
		{Kind: cuptiwire.RecordKindSync, Start: 1, End: 2},
		{Kind: cuptiwire.RecordKindGraph, Start: 1, End: 2},
	}, k, NewCache())
	got := map[string]map[string]bool{}
	for _, p := range flatten(a.Flush(3)) {
		if got[p.metric] == nil {
			got[p.metric] = map[string]bool{}
		}
		for attr := range p.attrs {
			got[p.metric][attr] = true
		}
	}
	dev := names.AttrCUDADeviceOrdinal
	want := map[string]map[string]bool{
		names.MetricKernelDuration: {names.AttrKernelName: true, names.AttrKernelCategory: true, dev: true},
		names.MetricKernelCount:    {names.AttrKernelName: true, names.AttrKernelCategory: true, dev: true},
		names.MetricMemcpyDuration: {names.AttrMemcpyKind: true, dev: true},
		names.MetricMemcpyBytes:    {names.AttrMemcpyKind: true, dev: true},
		names.MetricMemsetDuration: {names.AttrMemoryKind: true, dev: true},
		names.MetricMemsetBytes:    {names.AttrMemoryKind: true, dev: true},
		names.MetricSyncDuration:   {names.AttrSyncKind: true, dev: true},
		names.MetricGraphDuration:  {names.AttrCUDAGraphSignature: true, dev: true},
		names.MetricGraphCount:     {names.AttrCUDAGraphSignature: true, dev: true},
		names.MetricGPUBusyTime:    {dev: true},
	}
	assert.Equal(t, want, got)
}

// A kernel near the top_kernels cut keeps its own series across flushes
// while it still ranks within twice top_kernels, instead of flipping
// between its name and "other" as its rank wobbles.
func TestTopKernelsStayChosenAcrossFlushes(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 2, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	ids := []uint32{0, a.Kernel([]byte("gemm_a")), a.Kernel([]byte("gemm_b")), a.Kernel([]byte("gemm_c"))}
	flush := func(da, db, dc uint64, at pcommon.Timestamp) []point {
		recs := []cuptiwire.Record{
			{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 0, End: da},
			{Kind: cuptiwire.RecordKindKernel, Name: 2, Start: 0, End: db},
			{Kind: cuptiwire.RecordKindKernel, Name: 3, Start: 0, End: dc},
		}
		require.Zero(t, a.Add(src, recs, ids, NewCache()))
		return flatten(a.Flush(at))
	}
	has := func(ps []point, name string) bool {
		_, ok := find(ps, names.MetricKernelDuration, map[string]any{names.AttrKernelName: name})
		return ok
	}
	ps := flush(100, 90, 80, 10)
	require.True(t, has(ps, "gemm_a") && has(ps, "gemm_b"))
	require.False(t, has(ps, "gemm_c"))
	// c overtakes b by a little: b stays, c stays in "other".
	ps = flush(100, 80, 85, 20)
	assert.True(t, has(ps, "gemm_b"), "b kept its series")
	assert.False(t, has(ps, "gemm_c"))
	o, ok := find(ps, names.MetricKernelDuration, map[string]any{names.AttrKernelName: "other"})
	require.True(t, ok)
	assert.InDelta(t, 85e-9, o, 1e-15)
	// b falls out of the first 2*top_kernels: c takes its place.
	ids = append(ids, a.Kernel([]byte("gemm_d")), a.Kernel([]byte("gemm_e")))
	recs := []cuptiwire.Record{
		{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 0, End: 100},
		{Kind: cuptiwire.RecordKindKernel, Name: 3, Start: 0, End: 90},
		{Kind: cuptiwire.RecordKindKernel, Name: 4, Start: 0, End: 85},
		{Kind: cuptiwire.RecordKindKernel, Name: 4, Start: 0, End: 5},
		{Kind: cuptiwire.RecordKindKernel, Name: 5, Start: 0, End: 50},
		{Kind: cuptiwire.RecordKindKernel, Name: 2, Start: 0, End: 1},
	}
	require.Zero(t, a.Add(src, recs, ids, NewCache()))
	ps = flatten(a.Flush(30))
	assert.True(t, has(ps, "gemm_a") && has(ps, "gemm_c"))
	assert.False(t, has(ps, "gemm_b"))
}

// A Kineto trace covering more time than one collection interval is emitted
// over its own time range, so its busy time never exceeds the time it spans.
func TestKinetoTraceEmittedOverItsOwnRange(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindKineto})
	k := []uint32{0, a.Kernel([]byte("k"))}
	const sec = uint64(1e9)
	base := uint64(1_700_000_000) * sec
	var recs []cuptiwire.Record
	for i := range 60 { // 60 s of kernels, each 0.9 s
		s := base + uint64(i)*sec
		recs = append(recs, cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: s, End: s + 9*sec/10})
	}
	// As the Kineto reader hands a trace over: records in batches, then the
	// trace's range and the busy union it computed (60 × 0.9 s).
	a.AddTrace(src, recs[:30], k, NewCache(), true)
	a.AddTrace(src, recs[30:], k, NewCache(), true)
	a.AddTraceRange(src, base, base+59*sec+9*sec/10)
	a.AddBusy(src, 0, 54*sec)
	now := pcommon.Timestamp(base + 100*sec)
	m := a.Flush(now) // one 10 s interval reads the whole trace
	dps := m.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	found := false
	for i := 0; i < dps.Len(); i++ {
		if dps.At(i).Name() != "inferprof.gpu.busy.time" {
			continue
		}
		dp := dps.At(i).Sum().DataPoints().At(0)
		found = true
		window := float64(dp.Timestamp()-dp.StartTimestamp()) / 1e9
		assert.Equal(t, pcommon.Timestamp(base), dp.StartTimestamp())
		assert.Equal(t, pcommon.Timestamp(base+59*sec+9*sec/10), dp.Timestamp())
		assert.InDelta(t, 54.0, dp.DoubleValue(), 1e-9)
		assert.LessOrEqual(t, dp.DoubleValue(), window)
	}
	require.True(t, found)
}

// The library's hello flags become resource attributes: graph mode and
// sampling are visible on every series.
func TestSourceFlagsBecomeResourceAttributes(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 3, Flags: cuptiwire.HelloGraphMode | cuptiwire.HelloDutyCycle})
	a.Add(src, []cuptiwire.Record{{Kind: cuptiwire.RecordKindGraph, Start: 1, End: 5}}, nil, NewCache())
	ps := flatten(a.Flush(10))
	require.NotEmpty(t, ps)
	assert.Equal(t, "graph", ps[0].res["inferprof.cupti.graph_mode"])
	assert.Equal(t, true, ps[0].res["inferprof.cupti.sampled"])
}

func TestRestoreMergesARefusedInterval(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, DefaultLimits)
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, Host: "h", PID: 7})
	k := []uint32{0, a.Kernel([]byte("k"))}
	a.Add(src, []cuptiwire.Record{{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 0, End: 100}}, k, NewCache())
	refused, tx := a.FlushTx(10)
	require.Equal(t, 3, refused.DataPointCount(), "kernel duration and count, busy time")
	// The connection closed meanwhile: its resource survives the refusal.
	a.Release(src)
	a.Add(src, []cuptiwire.Record{{Kind: cuptiwire.RecordKindKernel, Name: 1, Start: 200, End: 230}}, k, NewCache())
	require.Zero(t, a.Restore(tx))

	md := a.Flush(20)
	ps := flatten(md)
	d, ok := find(ps, names.MetricKernelDuration, map[string]any{names.AttrKernelName: "k"})
	require.True(t, ok)
	assert.InDelta(t, 130e-9, d, 1e-15)
	n, _ := find(ps, names.MetricKernelCount, map[string]any{names.AttrKernelName: "k"})
	assert.Equal(t, 2.0, n)
	busy, _ := find(ps, "inferprof.gpu.busy.time", nil)
	assert.InDelta(t, 130e-9, busy, 1e-15)
	assert.Equal(t, int64(7), ps[0].res["process.pid"])
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	assert.Equal(t, pcommon.Timestamp(1), dp.StartTimestamp(), "the merged point spans both intervals")
	assert.Zero(t, a.Sources(), "pruned once delivered")
}

func TestRestoreKeepsTheKeyLimit(t *testing.T) {
	t.Parallel()
	a := newAgg(t, 10, Limits{MaxNames: 10, MaxSources: 2, MaxKeys: 2})
	src, _ := a.Source(Source{Kind: SourceKindCUPTI, PID: 1})
	k := []uint32{0, a.Kernel([]byte("a")), a.Kernel([]byte("b")), a.Kernel([]byte("c"))}
	rec := func(name uint32, n int) []cuptiwire.Record {
		r := make([]cuptiwire.Record, n)
		for i := range r {
			r[i] = cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Name: name, Start: uint64(i * 10), End: uint64(i*10 + 5)}
		}
		return r
	}
	a.Add(src, append(rec(1, 3), rec(2, 4)...), k, NewCache())
	_, tx := a.FlushTx(10)
	assert.Equal(t, uint64(7), tx.Records())
	assert.Equal(t, 2, tx.Series())
	// Meanwhile the table filled with other keys: "a" still fits (its key is
	// there), "b" has no room and is lost, counted by the caller.
	a.Add(src, append(rec(1, 1), rec(3, 1)...), k, NewCache())
	assert.Equal(t, uint64(4), a.Restore(tx))
	ps := flatten(a.Flush(20))
	n, _ := find(ps, names.MetricKernelCount, map[string]any{names.AttrKernelName: "a"})
	assert.Equal(t, 4.0, n)
	_, ok := find(ps, names.MetricKernelCount, map[string]any{names.AttrKernelName: "b"})
	assert.False(t, ok)
}
