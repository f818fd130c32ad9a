// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadatatest"
)

// A stream whose engine keeps launching kernels while no buffer reaches the
// library is a warning and a count; an idle engine, or one in the off part of
// its duty cycle, is not.
func TestQuietStreamWhileEngineRuns(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.QuietAfter = time.Nanosecond })
	c := dial(t, h.cfg.Endpoint)
	live := func(l cuptiwire.Liveness) []byte { return cuptiwire.AppendLiveness(nil, l) }
	var b []byte
	b = cuptiwire.AppendHelloFlags(b, 77, cuptiwire.HelloRateLimited, 1, "gpu-1")
	b = cuptiwire.AppendStats(b, cuptiwire.Stats{PoolExhausted: 2, OverflowDropped: 30, RateLimited: 400})
	b = append(b, live(cuptiwire.Liveness{Launches: 10, BuffersCompleted: 5, State: cuptiwire.LiveEnabled})...)
	// Another profiler took the callbacks: the library says so.
	b = append(b, live(cuptiwire.Liveness{Launches: 20, BuffersCompleted: 5, State: cuptiwire.LiveEnabled | cuptiwire.LiveDisplaced})...)
	_, err := c.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_quiet_streams") == 1 }, 10*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverCuptiPoolExhausted(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverCuptiOverflowDroppedRecords(t, h.tel, []metricdata.DataPoint[int64]{{Value: 30}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverCuptiRateLimitedRecords(t, h.tel, []metricdata.DataPoint[int64]{{Value: 400}}, metricdatatest.IgnoreTimestamp())

	// Buffers flow again, then stop while launches go on past quiet_after.
	b = live(cuptiwire.Liveness{Launches: 30, BuffersCompleted: 6, State: cuptiwire.LiveEnabled})
	b = append(b, live(cuptiwire.Liveness{Launches: 40, BuffersCompleted: 6, State: cuptiwire.LiveEnabled})...)
	_, err = c.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_quiet_streams") == 2 }, 10*time.Second, 5*time.Millisecond)

	// A second engine that is idle, then in its duty cycle's off part.
	c2 := dial(t, h.cfg.Endpoint)
	b = cuptiwire.AppendHello(nil, 78, 1, "gpu-1")
	b = append(b, live(cuptiwire.Liveness{Launches: 5, BuffersCompleted: 1, State: cuptiwire.LiveEnabled})...)
	b = append(b, live(cuptiwire.Liveness{Launches: 5, BuffersCompleted: 1, State: cuptiwire.LiveEnabled})...)
	b = append(b, live(cuptiwire.Liveness{Launches: 9, BuffersCompleted: 1, State: cuptiwire.LiveDutyOff})...)
	// The stats frame after them proves they were all handled.
	b = cuptiwire.AppendStats(b, cuptiwire.Stats{PoolExhausted: 1})
	_, err = c2.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_pool_exhausted") == 3 }, 10*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverCuptiQuietStreams(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

// memStorage is a storage extension kept in memory, shared by two receiver
// instances the way file_storage is shared by a collector and its restart.
type memStorage struct {
	component.StartFunc
	component.ShutdownFunc
	mu   sync.Mutex
	data map[string][]byte
}

func (m *memStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return &memClient{m: m}, nil
}

type memClient struct{ m *memStorage }

func (c *memClient) Get(_ context.Context, k string) ([]byte, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.m.data[k], nil
}

func (c *memClient) Set(_ context.Context, k string, v []byte) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.data[k] = append([]byte(nil), v...)
	return nil
}

func (c *memClient) Delete(_ context.Context, k string) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	delete(c.m.data, k)
	return nil
}

func (c *memClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		var err error
		switch op.Type {
		case storage.Get:
			op.Value, err = c.Get(ctx, op.Key)
		case storage.Set:
			err = c.Set(ctx, op.Key, op.Value)
		case storage.Delete:
			err = c.Delete(ctx, op.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (*memClient) Close(context.Context) error { return nil }

type storageHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// A restart with kineto.storage does not read a trace twice.
func TestKinetoStorageSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyFixture := func(name, as string) {
		data, err := os.ReadFile(filepath.Join("testdata", "kineto", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, as), data, 0o600))
	}
	copyFixture("triton_example-triton_example.json.gz", "a.json.gz")
	id := component.MustNewID("file_storage")
	st := &memStorage{data: map[string][]byte{}}
	host := storageHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: st}}

	run := func() (*cuptiReceiver, *consumertest.MetricsSink, *componenttest.Telemetry) {
		cfg := createDefaultConfig().(*Config)
		cfg.Endpoint = ""
		cfg.Kineto.Directory = dir
		cfg.Kineto.Storage = &id
		cfg.CollectionInterval = 20 * time.Millisecond
		require.NoError(t, cfg.Validate())
		tel := componenttest.NewTelemetry()
		t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
		r, err := newReceiver(metadatatest.NewSettings(tel), cfg)
		require.NoError(t, err)
		sink := new(consumertest.MetricsSink)
		r.nextMetrics = sink
		require.NoError(t, r.Start(t.Context(), host))
		return r, sink, tel
	}
	count := func(tel *componenttest.Telemetry) int64 {
		h := &harness{tel: tel}
		return h.counter(t, "receiver_cupti_trace_files")
	}

	r1, sink1, tel1 := run()
	require.Eventually(t, func() bool { return count(tel1) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return kernelSeconds(sink1, "triton_poi_fused_add_cos_sin", 0) > 0 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r1.Shutdown(context.Background()))

	r2, sink2, tel2 := run()
	t.Cleanup(func() { require.NoError(t, r2.Shutdown(context.Background())) })
	// A new file after the restart is read; once it is, the old one had the
	// same scans to be read in and was not.
	copyFixture("alexnet-benchmark_result_2869224_1695835535_trace.json.gz", "b.json.gz")
	require.Eventually(t, func() bool { return count(tel2) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r2.Shutdown(context.Background())) // flushes what was read
	require.Positive(t, sink2.DataPointCount(), "the new file's data arrived")
	require.Zero(t, kernelSeconds(sink2, "triton_poi_fused_add_cos_sin", 0))

	// Without the storage the same restart reads the old file again.
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = ""
	cfg.Kineto.Directory = dir
	cfg.CollectionInterval = 20 * time.Millisecond
	tel3 := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel3.Shutdown(context.Background())) })
	r3, err := newReceiver(metadatatest.NewSettings(tel3), cfg)
	require.NoError(t, err)
	sink3 := new(consumertest.MetricsSink)
	r3.nextMetrics = sink3
	require.NoError(t, r3.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, r3.Shutdown(context.Background())) })
	require.Eventually(t, func() bool { return count(tel3) == 2 }, 10*time.Second, 5*time.Millisecond)
}

// kineto.storage naming an extension that is not there stops Start with a
// message that says what to do.
func TestKinetoStorageMissing(t *testing.T) {
	t.Parallel()
	id := component.MustNewID("file_storage")
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = ""
	cfg.Kineto.Directory = t.TempDir()
	cfg.Kineto.Storage = &id
	r, err := newReceiver(metadatatest.NewSettings(componenttest.NewTelemetry()), cfg)
	require.NoError(t, err)
	err = r.Start(t.Context(), componenttest.NewNopHost())
	require.ErrorContains(t, err, "add it under extensions")
	require.NoError(t, r.Shutdown(context.Background()))
}
