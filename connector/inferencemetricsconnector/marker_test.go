// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadatatest"
)

var storageID = component.MustNewIDWithName("file_storage", "test")

// storageHost offers one real file_storage extension, as a collector whose
// config names it does.
type storageHost struct{ ext extension.Extension }

func (h storageHost) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{storageID: h.ext}
}

// startStorage starts file_storage on dir; each run of a "collector" in a
// test opens its own on the same folder, as a restart does.
func startStorage(t *testing.T, dir string) storageHost {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(t.Context(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return storageHost{ext: ext}
}

// run is one collector run of the connector with storage, on a fake clock.
type run struct {
	*harness
	logs *observer.ObservedLogs
	next *refusingSink
}

func startRun(t *testing.T, host storageHost) *run {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.MetricsFlushInterval = 5 * time.Second
	cfg.Storage = &storageID
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, logs := observer.New(zapcore.WarnLevel)
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)
	r := &run{harness: &harness{clock: clockwork.NewFakeClockAt(t0), tel: tel}, logs: logs, next: &refusingSink{}}
	c, err := newConnector(set, cfg, r.next, r.clock)
	require.NoError(t, err)
	r.c = c
	require.NoError(t, c.Start(t.Context(), host))
	// Both tickers, flush and marker, wait on the fake clock.
	require.NoError(t, r.clock.BlockUntilContext(t.Context(), 2))
	return r
}

// send aggregates n request spans.
func (r *run) send(t *testing.T, n int) {
	t.Helper()
	td, spans := batch(vllmResource)
	for range n {
		r.addSpan(spans, "llm_request", time.Second, canonical("llama", 0.1, 1, 0, 0.1, 0.9, 10, 10))
	}
	require.NoError(t, r.c.ConsumeTraces(t.Context(), td))
}

// tick advances the clock by d and waits until the marker says want.
func (r *run) tick(t *testing.T, d time.Duration, want int64) {
	t.Helper()
	r.clock.Advance(d)
	require.Eventually(t, func() bool { return r.c.markerSpans.Load() == want }, 10*time.Second, time.Millisecond)
}

// kill stops the run the way SIGKILL does: no final flush, storage left as is.
func (r *run) kill(host storageHost) {
	r.c.cancel()
	r.c.wg.Wait()
	_ = r.c.markerClient.Close(context.Background())
	r.c.telemetry.Shutdown()
	_ = host.ext.Shutdown(context.Background())
}

func lostOnRestart(t *testing.T, r *run, spans int64) {
	t.Helper()
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp()}
	metadatatest.AssertEqualConnectorInferenceMetricsLostOnRestartSpans(t, r.tel, []metricdata.DataPoint[int64]{{Value: spans}}, opts...)
	metadatatest.AssertEqualConnectorInferenceMetricsLostOnRestartWindows(t, r.tel, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
}

func TestKillLosesTheOpenWindowCounted(t *testing.T) {
	dir := t.TempDir()
	host := startStorage(t, dir)
	first := startRun(t, host)

	// A window that was flushed is not lost.
	first.send(t, 4)
	first.tick(t, time.Second, 4)
	first.tick(t, 4*time.Second, 0)
	require.Len(t, first.next.AllMetrics(), 1)

	// The next one is open when the process is killed: 7 spans recorded, and
	// 2 more that arrived after the last marker write, which a crash loses
	// uncounted (up to markerEvery of spans).
	first.send(t, 7)
	first.tick(t, time.Second, 7)
	first.send(t, 2)
	first.kill(host)

	host = startStorage(t, dir)
	second := startRun(t, host)
	lostOnRestart(t, second, 7)
	require.Equal(t, 1, second.logs.Len())
	entry := second.logs.All()[0]
	assert.Contains(t, entry.Message, "without flushing its window")
	assert.Equal(t, uint64(7), entry.ContextMap()["spans"])
	assert.Equal(t, int64(0), second.c.markerSpans.Load(), "the new run opens a fresh window")

	// A clean stop flushes: the next start counts nothing more.
	second.send(t, 3)
	second.tick(t, time.Second, 3)
	require.NoError(t, second.c.Shutdown(t.Context()))
	require.NoError(t, host.ext.Shutdown(t.Context()))
	third := startRun(t, startStorage(t, dir))
	_, err := third.tel.GetMetric("otelcol_connector_inference_metrics_lost_on_restart_spans")
	require.Error(t, err, "nothing was lost")
	assert.Zero(t, third.logs.Len())
	require.NoError(t, third.c.Shutdown(t.Context()))
}

// A flush the next consumer refuses (memory_limiter, a full queue) leaves
// the window open: those spans are still only in memory.
func TestRefusedFlushKeepsTheWindowOpen(t *testing.T) {
	dir := t.TempDir()
	host := startStorage(t, dir)
	first := startRun(t, host)
	first.send(t, 5)
	first.next.refuse = errors.New("data refused due to high memory usage")
	first.tick(t, time.Second, 5)
	first.clock.Advance(4 * time.Second)
	require.Eventually(t, func() bool {
		got, err := first.tel.GetMetric("otelcol_connector_inference_metrics_refused_flushes")
		return err == nil && got.Data.(metricdata.Sum[int64]).DataPoints[0].Value == 1
	}, 10*time.Second, time.Millisecond)
	first.send(t, 1)
	first.tick(t, time.Second, 6)
	first.kill(host)

	second := startRun(t, startStorage(t, dir))
	lostOnRestart(t, second, 6)
	require.NoError(t, second.c.Shutdown(t.Context()))
}

func TestMissingStorageFailsStart(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Storage = &storageID
	c, err := newConnector(metadatatest.NewSettings(componenttest.NewTelemetry()), cfg, &refusingSink{}, clockwork.NewFakeClock())
	require.NoError(t, err)
	err = c.Start(t.Context(), componenttest.NewNopHost())
	require.ErrorContains(t, err, `extension "file_storage/test" not found`)
	require.NoError(t, c.Shutdown(t.Context()))
}

func TestMarkerRoundTrip(t *testing.T) {
	m := marker{spans: 149_500, opened: t0}
	got, err := decodeMarker(m.encode())
	require.NoError(t, err)
	assert.Equal(t, m, got)
	_, err = decodeMarker([]byte{1, 2, 3})
	require.ErrorIs(t, err, errMarkerLength)
}

// FuzzDecodeMarker: what storage hands back after a crash may be anything.
func FuzzDecodeMarker(f *testing.F) {
	f.Add(marker{spans: 7, opened: t0}.encode())
	f.Add([]byte{})
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMarker(b)
		if err != nil {
			return
		}
		assert.Equal(t, b, m.encode())
	})
}
