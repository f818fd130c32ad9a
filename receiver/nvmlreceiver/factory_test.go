// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/inferprof/inferprof/internal/sharedcomponent"
	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// TestMetricsAndLogsPipelinesShareOneNVMLSession drives both scraper controllers by hand: an XID
// reaches the logs sink as a record and the metrics sink as a counter, and NVML is initialised and
// shut down once for the two receivers.
func TestMetricsAndLogsPipelinesShareOneNVMLSession(t *testing.T) {
	srv, q := newMockServer(2)
	env := newTestEnv(t, srv, nil)
	// Two handles on one source, as the factory hands the two receivers.
	shared := sharedcomponent.NewMap[*Config, sourceComponent]()
	handle := func() sharedSource {
		h, err := shared.LoadOrStore(env.src.cfg, func() (sourceComponent, error) { return sourceComponent{env.src}, nil })
		require.NoError(t, err)
		return h
	}
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = env.src.logger

	metricTicks, logTicks := make(chan time.Time), make(chan time.Time)
	metricsSink, logsSink := new(consumertest.MetricsSink), new(consumertest.LogsSink)
	mr, err := newMetricsReceiver(set, env.src.cfg, handle(), metricsSink, scraperhelper.WithTickerChannel(metricTicks))
	require.NoError(t, err)
	env.src.wantLogs()
	lr, err := newLogsReceiver(set, env.src.cfg, handle(), logsSink, scraperhelper.WithTickerChannel(logTicks))
	require.NoError(t, err)

	host := componenttest.NewNopHost()
	require.NoError(t, mr.Start(t.Context(), host))
	require.NoError(t, lr.Start(t.Context(), host))
	assert.Len(t, srv.InitCalls(), 1)

	// The controllers scrape once at start (after initial_delay); wait for that, then drive by ticks.
	require.Eventually(t, func() bool { return metricsSink.DataPointCount() > 0 }, 10*time.Second, 10*time.Millisecond)
	q.push(nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 31})
	logTicks <- time.Now()
	require.Eventually(t, func() bool { return logsSink.LogRecordCount() == 1 }, 10*time.Second, 10*time.Millisecond)
	var body string
	for _, l := range logsSink.AllLogs() {
		if l.LogRecordCount() > 0 {
			body = l.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().Str()
		}
	}
	assert.Contains(t, body, "XID 31")

	n := len(metricsSink.AllMetrics())
	metricTicks <- time.Now()
	require.Eventually(t, func() bool { return len(metricsSink.AllMetrics()) > n }, 10*time.Second, 10*time.Millisecond)
	md := metricsSink.AllMetrics()[len(metricsSink.AllMetrics())-1]
	assert.InDelta(t, 1, point(t, resourceByUUID(t, md, uuidOf(srv, 0)), "nvidia.gpu.xid.errors", "{error}", "nvidia.gpu.xid", "31"), 0)

	require.NoError(t, mr.Shutdown(t.Context()))
	assert.Empty(t, srv.ShutdownCalls(), "NVML stays up while the logs receiver runs")
	require.NoError(t, lr.Shutdown(t.Context()))
	assert.Len(t, srv.ShutdownCalls(), 1)
	assert.Equal(t, 0, shared.Len(), "the config is forgotten with its last receiver")
}
