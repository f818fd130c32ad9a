// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/extension/stepstoreextension/stepstoretest"
	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/telemetrytest"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadatatest"
)

// socketDir returns a short temporary folder: Unix socket paths are limited
// to 108 bytes, which t.TempDir() can exceed.
func socketDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cupti")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

type harness struct {
	r    *cuptiReceiver
	sink *consumertest.MetricsSink
	tel  *componenttest.Telemetry
	cfg  *Config
	logs *observer.ObservedLogs
	win  *gpuwindow.Window // the host's step store; the receiver uses it when cfg.StepStore names it
}

func start(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	return startWithSpans(t, mutate, nil)
}

// startWithSpans starts a receiver that is also in a traces pipeline,
// consuming into spans (none when nil).
func startWithSpans(t *testing.T, mutate func(*Config), spans *consumertest.TracesSink) *harness {
	t.Helper()
	return startWithClock(t, mutate, spans, time.Now)
}

// startWithClock is startWithSpans with the receiver reading time from now,
// set before Start so no goroutine reads it unsynchronised.
func startWithClock(t *testing.T, mutate func(*Config), spans *consumertest.TracesSink, now func() time.Time) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = filepath.Join(socketDir(t), "sock", "cupti.sock")
	cfg.CollectionInterval = 20 * time.Millisecond
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.MetricsSink)
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	r, err := newReceiver(set, cfg)
	require.NoError(t, err)
	r.nextMetrics = sink
	r.now = now
	if spans != nil {
		r.nextTraces = spans
	}
	host, win := stepstoretest.NewHost(t)
	require.NoError(t, r.Start(t.Context(), host))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
	return &harness{r: r, sink: sink, tel: tel, cfg: cfg, logs: logs, win: win}
}

// counter reads one of the receiver's own counters, declared in
// metadata.yaml (a misspelt name fails); the exact checks use metadatatest.
func (h *harness) counter(t *testing.T, name string) int64 {
	t.Helper()
	return telemetrytest.NewCounters(t, h.tel, "metadata.yaml").Sum(t, name)
}

// kernelSeconds sums a kernel's duration over everything the sink got.
func kernelSeconds(sink *consumertest.MetricsSink, kernel string, pid int64) float64 {
	return kernelSum(sink, names.MetricKernelDuration, kernel, pid)
}

// kernelSum sums a kernel's data points of one metric over everything the
// sink got; pid 0 takes every process.
func kernelSum(sink *consumertest.MetricsSink, metric, kernel string, pid int64) float64 {
	var total float64
	for _, md := range sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			if p, ok := rm.Resource().Attributes().Get("process.pid"); pid != 0 && (!ok || p.Int() != pid) {
				continue
			}
			ms := rm.ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				if ms.At(j).Name() != metric {
					continue
				}
				dps := ms.At(j).Sum().DataPoints()
				for k := 0; k < dps.Len(); k++ {
					dp := dps.At(k)
					if n, _ := dp.Attributes().Get(names.AttrKernelName); n.Str() != kernel {
						continue
					}
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						total += float64(dp.IntValue())
					} else {
						total += dp.DoubleValue()
					}
				}
			}
		}
	}
	return total
}

func dial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func kernels(name uint32, n int, dur uint64) []cuptiwire.Record {
	recs := make([]cuptiwire.Record, n)
	for i := range recs {
		start := uint64(1_700_000_000_000_000_000 + i*10_000)
		recs[i] = cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: name, Start: start, End: start + dur}
	}
	return recs
}

func TestSocketPermissions(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	fi, err := os.Stat(h.cfg.Endpoint)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(h.cfg.Endpoint))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
}

// A bad frame on one connection drops that connection only; the other
// keeps streaming and its kernels arrive.
func TestBadConnectionDoesNotDisturbOthers(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	good := dial(t, h.cfg.Endpoint)
	bad := dial(t, h.cfg.Endpoint)

	b := cuptiwire.AppendHello(nil, 101, 0, "node-a")
	b = cuptiwire.AppendString(b, 1, "void vllm::rms_norm_kernel<float>(float*)")
	b = cuptiwire.AppendRecords(b, kernels(1, 100, 2000))
	_, err := good.Write(b)
	require.NoError(t, err)

	junk := cuptiwire.AppendHello(nil, 202, 0, "node-a")
	junk = cuptiwire.AppendRecords(junk, kernels(9, 1, 10)) // name 9 never defined
	_, err = bad.Write(junk)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_bad_connections") == 1 }, 5*time.Second, 5*time.Millisecond)
	// The receiver closed the bad connection.
	_ = bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = bad.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)

	_, err = good.Write(cuptiwire.AppendRecords(nil, kernels(1, 50, 2000)))
	require.NoError(t, err)
	_, err = good.Write(cuptiwire.AppendStats(nil, cuptiwire.Stats{DroppedRecords: 7, CUPTIDropped: 2}))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return kernelSeconds(h.sink, "vllm::rms_norm_kernel", 101) >= 150*2000e-9-1e-12
	}, 5*time.Second, 5*time.Millisecond)
	assert.InDelta(t, 150*2000e-9, kernelSeconds(h.sink, "vllm::rms_norm_kernel", 101), 1e-12)
	assert.Zero(t, kernelSeconds(h.sink, "vllm::rms_norm_kernel", 202))
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_engine_dropped_records") == 7 }, 5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverCuptiCuptiDroppedRecords(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverCuptiConnections(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

// A library whose connection dropped reconnects and sends its totals again:
// only what is new since its last stats frame is counted. A restarted
// engine with the same pid is another load of the library and counts from 0.
func TestLibraryStatsSurviveReconnect(t *testing.T) {
	h := start(t, nil)
	send := func(start uint64, st cuptiwire.Stats) {
		c := dial(t, h.cfg.Endpoint)
		_, err := c.Write(cuptiwire.AppendStats(cuptiwire.AppendHello(nil, 303, start, "node-a"), st))
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	send(1000, cuptiwire.Stats{DroppedRecords: 5, CUPTIDropped: 1, LaunchesDropped: 2})
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_engine_dropped_records") == 5 }, 5*time.Second, 5*time.Millisecond)
	send(1000, cuptiwire.Stats{DroppedRecords: 7, CUPTIDropped: 1, LaunchesDropped: 2})
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_engine_dropped_records") == 7 }, 5*time.Second, 5*time.Millisecond)
	send(2000, cuptiwire.Stats{DroppedRecords: 3})
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_engine_dropped_records") == 10 }, 5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverCuptiCuptiDroppedRecords(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp()) // sent twice, counted once
	metadatatest.AssertEqualReceiverCuptiConnections(t, h.tel, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
}

// Tensor-parallel workers connect at once; each keeps its own resource.
func TestManyConcurrentConnections(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c, err := net.Dial("unix", h.cfg.Endpoint)
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			b := cuptiwire.AppendHello(nil, uint32(1000+w), 0, "node")
			b = cuptiwire.AppendString(b, 1, "ampere_sgemm_128x64_tn")
			for range 10 {
				b = cuptiwire.AppendRecords(b, kernels(1, 100, 1000))
			}
			_, err = c.Write(b)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	for w := range workers {
		require.Eventually(t, func() bool {
			return kernelSeconds(h.sink, "ampere_sgemm_128x64_tn", int64(1000+w)) >= 1000*1000e-9-1e-12
		}, 5*time.Second, 5*time.Millisecond)
	}
	assert.InDelta(t, workers*1000*1000e-9, kernelSeconds(h.sink, "ampere_sgemm_128x64_tn", 0), 1e-9)
}

func TestMaxConnections(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.MaxConnections = 1 })
	first := dial(t, h.cfg.Endpoint)
	_, err := first.Write(cuptiwire.AppendHello(nil, 1, 0, ""))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_connections") == 1 }, 5*time.Second, 5*time.Millisecond)
	second := dial(t, h.cfg.Endpoint)
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = second.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	metadatatest.AssertEqualReceiverCuptiConnectionsRejected(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestStaleSocketIsReplacedLiveOneRefused(t *testing.T) {
	t.Parallel()
	dir := socketDir(t)
	path := filepath.Join(dir, "cupti.sock")
	// A socket file nobody listens on, as a crashed collector leaves it.
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())

	h := start(t, func(c *Config) { c.Endpoint = path })
	dial(t, path)

	cfg := *h.cfg
	r2, err := newReceiver(metadatatest.NewSettings(componenttest.NewTelemetry()), &cfg)
	require.NoError(t, err)
	require.ErrorContains(t, r2.Start(t.Context(), componenttest.NewNopHost()), "another process is serving it")
	require.NoError(t, r2.Shutdown(t.Context()))
}

func TestShutdownWithoutStartAndTwice(t *testing.T) {
	t.Parallel()
	r, err := newReceiver(metadatatest.NewSettings(componenttest.NewTelemetry()), createDefaultConfig().(*Config))
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(t.Context()))
	require.NoError(t, r.Shutdown(t.Context()))
}

// Shutdown flushes what was summed, so nothing received is lost.
func TestShutdownFlushes(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.CollectionInterval = time.Hour })
	c := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendString(cuptiwire.AppendHello(nil, 5, 0, ""), 1, "k_kernel")
	_, err := c.Write(cuptiwire.AppendRecords(b, kernels(1, 10, 100)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { rec, _ := h.r.agg.Stats(); return rec == 10 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, h.r.Shutdown(t.Context()))
	assert.InDelta(t, 10*100e-9, kernelSeconds(h.sink, "k_kernel", 5), 1e-15)
}

func TestKinetoDirectory(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "kineto", "triton_example-triton_example.json.gz")
	data, err := os.ReadFile(fixture)
	require.NoError(t, err, "the Kineto fixtures are in testdata/kineto")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rank0.pt.trace.json.gz"), data, 0o600))
	// A half-written plain trace and a file that is not JSON at all.
	zr, err := gzip.NewReader(mustOpen(t, fixture))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "half.json"), plain[:len(plain)/2], 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.json.gz"), []byte("not gzip"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o600))

	h := start(t, func(c *Config) { c.Endpoint = ""; c.Kineto.Directory = dir })
	require.Eventually(t, func() bool {
		return kernelSeconds(h.sink, "triton_poi_fused_add_cos_sin", 0) > 0
	}, 10*time.Second, 5*time.Millisecond)
	assert.InDelta(t, 1.76e-6, kernelSeconds(h.sink, "triton_poi_fused_add_cos_sin", 0), 1e-12)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_bad_trace_files") == 2 }, 5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverCuptiTraceFiles(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	// Each file is read once.
	before := len(h.sink.AllMetrics())
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_records") > 0 }, 5*time.Second, 5*time.Millisecond)
	assert.InDelta(t, 1.76e-6, kernelSeconds(h.sink, "triton_poi_fused_add_cos_sin", 0), 1e-12)
	assert.GreaterOrEqual(t, len(h.sink.AllMetrics()), before)
	var res pmetric.ResourceMetrics
	for _, md := range h.sink.AllMetrics() {
		if md.ResourceMetrics().Len() > 0 {
			res = md.ResourceMetrics().At(0)
		}
	}
	src, _ := res.Resource().Attributes().Get("inferprof.activity.source")
	assert.Equal(t, "kineto", src.Str())
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// Kernel spans: off by default; when on, sampled and capped, with the
// metrics resource.
func TestKernelSpans(t *testing.T) {
	t.Parallel()
	traces := new(consumertest.TracesSink)
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = filepath.Join(socketDir(t), "cupti.sock")
	cfg.CollectionInterval = 20 * time.Millisecond
	cfg.Spans = SpansConfig{Enabled: true, SamplingRatio: 0.1, MaxPerInterval: 5}
	require.NoError(t, cfg.Validate())
	set := metadatatest.NewSettings(componenttest.NewTelemetry())
	f := NewFactory()
	metrics := new(consumertest.MetricsSink)
	mr, err := f.CreateMetrics(t.Context(), set, cfg, metrics)
	require.NoError(t, err)
	tr, err := f.CreateTraces(t.Context(), set, cfg, traces)
	require.NoError(t, err)
	require.Same(t, unwrap(mr), unwrap(tr), "one socket serves both pipelines")
	require.NoError(t, mr.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, tr.Start(t.Context(), componenttest.NewNopHost()))
	defer func() {
		require.NoError(t, tr.Shutdown(context.Background()))
		require.NoError(t, mr.Shutdown(context.Background()))
	}()

	c := dial(t, cfg.Endpoint)
	b := cuptiwire.AppendString(cuptiwire.AppendHello(nil, 77, 0, "h"), 1, "void vllm::rms_norm_kernel<float>(float*)")
	_, err = c.Write(cuptiwire.AppendRecords(b, kernels(1, 30, 500))) // 3 sampled
	require.NoError(t, err)
	require.Eventually(t, func() bool { return traces.SpanCount() == 3 }, 5*time.Second, 5*time.Millisecond)
	span := traces.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "vllm::rms_norm_kernel", span.Name())
	assert.Equal(t, uint64(500), uint64(span.EndTimestamp()-span.StartTimestamp()))
	cat, _ := span.Attributes().Get(names.AttrKernelCategory)
	assert.Equal(t, "normalization", cat.Str())
	pid, _ := traces.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes().Get("process.pid")
	assert.Equal(t, int64(77), pid.Int())

	_, err = c.Write(cuptiwire.AppendRecords(nil, kernels(1, 1000, 500))) // 100 sampled, capped at 5 per interval
	require.NoError(t, err)
	require.Eventually(t, func() bool { rec, _ := unwrap(mr).agg.Stats(); return rec == 1030 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return kernelSeconds(metrics, "vllm::rms_norm_kernel", 77) >= 1030*500e-9-1e-12 }, 5*time.Second, 5*time.Millisecond)
	assert.LessOrEqual(t, traces.SpanCount(), 3+5*2, "capped per interval")
}

func TestSpansOffByDefault(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig().(*Config)
	assert.False(t, cfg.Spans.Enabled)
	cfg.Spans.Enabled = true
	cfg.Spans.SamplingRatio = 0
	require.ErrorContains(t, cfg.Validate(), "spans.sampling_ratio 0")
}

// Hello-only clients filling max_connections are closed after idle_timeout,
// counted, and a real library that connects after them gets in.
func TestIdleClientsDoNotLockOutTheLibrary(t *testing.T) {
	t.Parallel()
	const idle = 8
	h := start(t, func(c *Config) { c.MaxConnections = idle; c.IdleTimeout = 300 * time.Millisecond })
	var squatters []net.Conn
	for i := range idle {
		c := dial(t, h.cfg.Endpoint)
		_, err := c.Write(cuptiwire.AppendHello(nil, uint32(9000+i), 0, "squatter"))
		require.NoError(t, err)
		squatters = append(squatters, c)
	}
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_connections") == idle }, 5*time.Second, 5*time.Millisecond)
	for _, c := range squatters {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF, "the receiver closes an idle connection")
	}
	metadatatest.AssertEqualReceiverCuptiIdleConnections(t, h.tel, []metricdata.DataPoint[int64]{{Value: idle}}, metricdatatest.IgnoreTimestamp())

	lib := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendHello(nil, 4242, 0, "node")
	b = cuptiwire.AppendString(b, 1, "ampere_sgemm_128x64_tn")
	b = cuptiwire.AppendRecords(b, kernels(1, 10, 1000))
	_, err := lib.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return kernelSeconds(h.sink, "ampere_sgemm_128x64_tn", 4242) >= 10*1000e-9-1e-12
	}, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, h.counter(t, "receiver_cupti_connections_rejected"))
}
