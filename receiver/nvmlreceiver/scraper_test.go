// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadatatest"
)

const containerID = "3f4b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b"

type testEnv struct {
	src  *nvmlSource
	tt   *componenttest.Telemetry
	logs *observer.ObservedLogs
	now  time.Time
}

func newTestEnv(t testing.TB, lib nvml.Interface, mutate func(*Config)) *testEnv {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	procRoot := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(procRoot, "4242"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(procRoot, "4242", "cgroup"),
		[]byte("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-"+containerID+".scope\n"), 0o600))
	cfg.Processes.ProcRoot = procRoot
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(tt)
	core, logs := observer.New(zapcore.DebugLevel)
	set.Logger = zap.New(core)
	src, err := newNVMLSource(cfg, set, lib)
	require.NoError(t, err)
	env := &testEnv{src: src, tt: tt, logs: logs, now: time.Unix(1_700_000_000, 0)}
	src.now = func() time.Time { return env.now }
	return env
}

// resourceByUUID returns the device resource (the one without process.pid) of a GPU.
func resourceByUUID(t *testing.T, md pmetric.Metrics, uuid string) pmetric.ResourceMetrics {
	t.Helper()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		id, _ := rm.Resource().Attributes().Get("hw.id")
		if _, isProc := rm.Resource().Attributes().Get("process.pid"); id.Str() == uuid && !isProc {
			return rm
		}
	}
	require.Failf(t, "no resource", "GPU %s", uuid)
	return pmetric.ResourceMetrics{}
}

func metricIn(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	ms := rm.ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() == name {
			return ms.At(i), true
		}
	}
	return pmetric.Metric{}, false
}

func dataPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	if m.Type() == pmetric.MetricTypeSum {
		return m.Sum().DataPoints()
	}
	return m.Gauge().DataPoints()
}

// point returns the value of the data point whose attributes include kv (key=value pairs).
func point(t *testing.T, rm pmetric.ResourceMetrics, name, unit string, kv ...string) float64 {
	t.Helper()
	m, ok := metricIn(rm, name)
	require.Truef(t, ok, "metric %s missing", name)
	assert.Equalf(t, unit, m.Unit(), "unit of %s", name)
	dps := dataPoints(m)
next:
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		for j := 0; j+1 < len(kv); j += 2 {
			v, ok := dp.Attributes().Get(kv[j])
			if !ok || v.AsString() != kv[j+1] {
				continue next
			}
		}
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			return float64(dp.IntValue())
		}
		return dp.DoubleValue()
	}
	require.Failf(t, "no data point", "%s %v", name, kv)
	return 0
}

func uuidOf(srv *server.Server, i int) string { return srv.Devices[i].(*server.Device).UUID }

func TestScrapeValuesUnitsAndAttributes(t *testing.T) {
	srv, _ := newMockServer(2)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, env.src.shutdown(t.Context())) })

	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)

	rm := resourceByUUID(t, md, uuidOf(srv, 1))
	attrs := rm.Resource().Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		"hw.id": uuidOf(srv, 1), "hw.name": "NVIDIA H200 141GB HBM3e", "hw.type": "gpu", "hw.vendor": "NVIDIA",
		"hw.driver_version": "550.54.15", "nvidia.gpu.index": int64(1), "nvidia.gpu.pci.bus_id": "0000:01:00.0",
		"nvidia.gpu.architecture": "hopper", "nvidia.gpu.compute_capability": "9.0",
		"nvidia.gpu.cuda_driver_version": "12.4", "nvidia.gpu.mig.mode": "disabled",
	}, attrs)

	assert.InDelta(t, 0.43, point(t, rm, "hw.gpu.utilization", "1", "hw.gpu.task", "general"), 1e-9)
	assert.InDelta(t, 0.03, point(t, rm, "hw.gpu.utilization", "1", "hw.gpu.task", "encoder"), 1e-9)
	assert.InDelta(t, 0.04, point(t, rm, "hw.gpu.utilization", "1", "hw.gpu.task", "decoder"), 1e-9)
	assert.InDelta(t, 0.17, point(t, rm, "nvidia.gpu.memory.activity", "1"), 1e-9)
	const total = 144384 << 20
	assert.InDelta(t, float64(11<<30), point(t, rm, "hw.gpu.memory.usage", "By"), 0)
	assert.InDelta(t, float64(total), point(t, rm, "hw.gpu.memory.limit", "By"), 0)
	assert.InDelta(t, float64(11<<30)/total, point(t, rm, "hw.gpu.memory.utilization", "1"), 1e-9)
	assert.InDelta(t, 350.5, point(t, rm, "hw.power", "W"), 1e-9)
	assert.InDelta(t, 123456.789, point(t, rm, "hw.energy", "J"), 1e-6)
	assert.InDelta(t, 61, point(t, rm, "hw.temperature", "Cel"), 0)
	assert.InDelta(t, 5, point(t, rm, "hw.errors", "{error}", "error.type", "corrected"), 0)
	assert.InDelta(t, 1, point(t, rm, "hw.errors", "{error}", "error.type", "uncorrected"), 0)
	assert.InDelta(t, 2, point(t, rm, "hw.errors", "{error}", "error.type", "pcie_replay"), 0)
	assert.InDelta(t, 1980e6, point(t, rm, "nvidia.gpu.clock.frequency", "Hz", "nvidia.gpu.clock", "sm"), 0)
	assert.InDelta(t, 2619e6, point(t, rm, "nvidia.gpu.clock.frequency", "Hz", "nvidia.gpu.clock", "memory"), 0)
	assert.InDelta(t, 0, point(t, rm, "nvidia.gpu.performance_state", "1"), 0)
	assert.InDelta(t, 3, point(t, rm, "nvidia.gpu.row_remap.rows", "{row}", "nvidia.gpu.row_remap.type", "correctable"), 0)
	assert.InDelta(t, 1, point(t, rm, "nvidia.gpu.row_remap.status", "1", "nvidia.gpu.row_remap.state", "pending"), 0)
	assert.InDelta(t, 0, point(t, rm, "nvidia.gpu.row_remap.status", "1", "nvidia.gpu.row_remap.state", "failed"), 0)
	assert.InDelta(t, 1000, point(t, rm, "hw.gpu.io", "By", "nvidia.gpu.interconnect", "pcie", "network.io.direction", "transmit"), 0)
	assert.InDelta(t, 2000, point(t, rm, "hw.gpu.io", "By", "nvidia.gpu.interconnect", "pcie", "network.io.direction", "receive"), 0)
	assert.InDelta(t, 10*1024, point(t, rm, "hw.gpu.io", "By", "nvidia.gpu.interconnect", "nvlink", "network.io.direction", "transmit"), 0)
	assert.InDelta(t, 20*1024, point(t, rm, "hw.gpu.io", "By", "nvidia.gpu.interconnect", "nvlink", "network.io.direction", "receive"), 0)
	assert.InDelta(t, 7, point(t, rm, "nvidia.gpu.nvlink.errors", "{error}", "nvidia.gpu.nvlink.error.type", "replay"), 0)

	// One series per throttle reason; only the active one is 1.
	m, ok := metricIn(rm, "nvidia.gpu.throttle")
	require.True(t, ok)
	assert.Equal(t, len(throttleReasons), m.Gauge().DataPoints().Len())
	assert.InDelta(t, 1, point(t, rm, "nvidia.gpu.throttle", "1", "nvidia.gpu.throttle.reason", "sw_power_cap"), 0)
	assert.InDelta(t, 0, point(t, rm, "nvidia.gpu.throttle", "1", "nvidia.gpu.throttle.reason", "hw_thermal_slowdown"), 0)

	// Unsupported on this board: no fan series and no NVLink ECC series.
	_, ok = metricIn(rm, "nvidia.gpu.fan.speed")
	assert.False(t, ok)
	m, _ = metricIn(rm, "nvidia.gpu.nvlink.errors")
	for i := 0; i < m.Sum().DataPoints().Len(); i++ {
		v, _ := m.Sum().DataPoints().At(i).Attributes().Get("nvidia.gpu.nvlink.error.type")
		assert.NotEqual(t, "ecc_data", v.Str())
	}

	// Per-process metrics sit under a resource with process.pid and, where visible, container.id.
	procs := map[int64]pcommon.Map{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		r := md.ResourceMetrics().At(i)
		id, _ := r.Resource().Attributes().Get("hw.id")
		if pid, ok := r.Resource().Attributes().Get("process.pid"); ok && id.Str() == uuidOf(srv, 1) {
			procs[pid.Int()] = r.Resource().Attributes()
			if pid.Int() == 4242 {
				assert.InDelta(t, float64(8<<30), point(t, r, "nvidia.gpu.process.memory.usage", "By"), 0)
				assert.InDelta(t, 0.8, point(t, r, "nvidia.gpu.process.utilization", "1", "nvidia.gpu.engine", "sm"), 1e-9)
				assert.InDelta(t, 0.3, point(t, r, "nvidia.gpu.process.utilization", "1", "nvidia.gpu.engine", "memory"), 1e-9)
			}
		}
	}
	require.Len(t, procs, 2)
	cid, ok := procs[4242].Get("container.id")
	require.True(t, ok)
	assert.Equal(t, containerID, cid.Str())
	_, ok = procs[999999].Get("container.id")
	assert.False(t, ok, "a process without a readable cgroup gets no container.id")
	name, _ := procs[4242].Get("hw.name")
	assert.Equal(t, "NVIDIA H200 141GB HBM3e", name.Str())
}

func TestUnsupportedFieldSkippedAfterFirstDebugLog(t *testing.T) {
	srv, _ := newMockServer(1)
	d := srv.Devices[0].(*server.Device)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	for range 3 {
		_, err := env.src.scrapeMetrics(t.Context())
		require.NoError(t, err)
	}
	assert.Len(t, d.GetFanSpeedCalls(), 1, "an unsupported field is asked once")
	fanLogs := env.logs.FilterField(zap.String("field", "fan speed"))
	require.Equal(t, 1, fanLogs.Len())
	assert.Equal(t, zapcore.DebugLevel, fanLogs.All()[0].Level)
	assert.Zero(t, env.logs.FilterLevelExact(zapcore.WarnLevel).Len())
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestDeviceFilter(t *testing.T) {
	srv, _ := newMockServer(8)
	tests := []struct {
		name    string
		devices func() string
		want    []int
	}{
		{"all", func() string { return "" }, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"indexes keep order", func() string { return "3, 1" }, []int{3, 1}},
		{"duplicate ignored", func() string { return "2,2" }, []int{2}},
		{"full uuid", func() string { return uuidOf(srv, 5) }, []int{5}},
		{"uuid prefix", func() string { return "6," + uuidOf(srv, 4)[:16] }, []int{6, 4}},
		{"stops at out-of-range index like CUDA", func() string { return "0,9,1" }, []int{0}},
		{"stops at unknown uuid", func() string { return "1,GPU-ffffffff,2" }, []int{1}},
		{"ambiguous uuid prefix stops", func() string { return "GPU-" + "," + "1" }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			devs := tc.devices()
			if tc.want == nil {
				// "GPU-" alone is rejected by Validate; check the runtime rule with a prefix all share.
				devs = "GPU"
				_, err := parseDeviceFilter(devs)
				require.Error(t, err)
				return
			}
			env := newTestEnv(t, srv, func(c *Config) { c.Devices = devs })
			require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
			var got []int
			for _, d := range env.src.devices {
				got = append(got, d.index)
			}
			assert.Equal(t, tc.want, got)
			md, err := env.src.scrapeMetrics(t.Context())
			require.NoError(t, err)
			for _, i := range tc.want {
				resourceByUUID(t, md, uuidOf(srv, i))
			}
			require.NoError(t, env.src.shutdown(t.Context()))
		})
	}
}

func TestXIDEventBecomesLogRecordAndCounter(t *testing.T) {
	srv, q := newMockServer(2)
	env := newTestEnv(t, srv, nil)
	env.src.wantLogs()
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, env.src.shutdown(t.Context())) })

	q.push(
		nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79},
		nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79},
		nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 999},
		nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeDoubleBitEccError, EventData: 0},
	)
	logs, err := env.src.scrapeLogs(t.Context())
	require.NoError(t, err)
	require.Equal(t, 4, logs.LogRecordCount())

	recs := map[string][]plog.LogRecord{}
	for i := 0; i < logs.ResourceLogs().Len(); i++ {
		rl := logs.ResourceLogs().At(i)
		id, _ := rl.Resource().Attributes().Get("hw.id")
		lrs := rl.ScopeLogs().At(0).LogRecords()
		for j := 0; j < lrs.Len(); j++ {
			recs[id.Str()] = append(recs[id.Str()], lrs.At(j))
		}
	}
	xid79 := recs[uuidOf(srv, 1)][0]
	assert.Equal(t, plog.SeverityNumberError, xid79.SeverityNumber())
	assert.Equal(t, "ERROR", xid79.SeverityText())
	assert.Equal(t, "nvidia.gpu.xid", xid79.EventName())
	assert.Contains(t, xid79.Body().Str(), "XID 79")
	assert.Contains(t, xid79.Body().Str(), "GPU has fallen off the bus")
	code, _ := xid79.Attributes().Get("nvidia.gpu.xid")
	assert.Equal(t, int64(79), code.Int())
	meaning, _ := xid79.Attributes().Get("nvidia.gpu.xid.meaning")
	assert.Equal(t, "GPU has fallen off the bus", meaning.Str())

	unknown := recs[uuidOf(srv, 0)][0]
	assert.Equal(t, "XID 999 on GPU 0 ("+uuidOf(srv, 0)+")", unknown.Body().Str())
	dbe := recs[uuidOf(srv, 0)][1]
	assert.Equal(t, "nvidia.gpu.double_bit_ecc_error", dbe.EventName())
	assert.Equal(t, plog.SeverityNumberError, dbe.SeverityNumber())

	// The events were drained by the logs scrape, yet the counter holds them, and keeps them on
	// every later scrape with no new event.
	for range 2 {
		md, err := env.src.scrapeMetrics(t.Context())
		require.NoError(t, err)
		assert.InDelta(t, 2, point(t, resourceByUUID(t, md, uuidOf(srv, 1)), "nvidia.gpu.xid.errors", "{error}", "nvidia.gpu.xid", "79"), 0)
		assert.InDelta(t, 1, point(t, resourceByUUID(t, md, uuidOf(srv, 0)), "nvidia.gpu.xid.errors", "{error}", "nvidia.gpu.xid", "999"), 0)
	}
	q.push(nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	assert.InDelta(t, 3, point(t, resourceByUUID(t, md, uuidOf(srv, 1)), "nvidia.gpu.xid.errors", "{error}", "nvidia.gpu.xid", "79"), 0)
	metadatatest.AssertEqualReceiverNvmlEvents(t, env.tt, []metricdata.DataPoint[int64]{{Value: 5}}, metricdatatest.IgnoreTimestamp())
}

func TestEventBufferBounded(t *testing.T) {
	srv, q := newMockServer(1)
	env := newTestEnv(t, srv, func(c *Config) { c.Events.MaxPending = 2 })
	env.src.wantLogs()
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	for range 5 {
		q.push(nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 13})
	}
	_, err := env.src.scrapeMetrics(t.Context()) // polls events into the buffer
	require.NoError(t, err)
	logs, err := env.src.scrapeLogs(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, logs.LogRecordCount())
	metadatatest.AssertEqualReceiverNvmlEventsDropped(t, env.tt, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	assert.InDelta(t, 5, point(t, resourceByUUID(t, md, uuidOf(srv, 0)), "nvidia.gpu.xid.errors", "{error}", "nvidia.gpu.xid", "13"), 0,
		"dropped log records are still counted")
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestNoEventsKeptWithoutLogsPipeline(t *testing.T) {
	srv, q := newMockServer(1)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	q.push(nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 48})
	_, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	assert.Empty(t, env.src.pending)
	assert.Equal(t, int64(1), env.src.devices[0].xid[48])
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestDeviceErrorsMidRun(t *testing.T) {
	srv, _ := newMockServer(2)
	bad := srv.Devices[1].(*server.Device)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, env.src.shutdown(t.Context())) })

	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	_, ok := metricIn(resourceByUUID(t, md, bad.UUID), "hw.power")
	require.True(t, ok)

	// The GPU falls off the bus: its utilisation, power and memory queries now fail.
	lost := true
	bad.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if lost {
			return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
		}
		return nvml.Utilization{Gpu: 5}, nvml.SUCCESS
	}
	bad.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if lost {
			return 0, nvml.ERROR_GPU_IS_LOST
		}
		return 1000, nvml.SUCCESS
	}
	bad.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }

	const scrapes = 5
	for range scrapes {
		md, err = env.src.scrapeMetrics(t.Context())
		require.NoError(t, err, "a failing device does not fail the scrape")
		good := resourceByUUID(t, md, uuidOf(srv, 0))
		for _, name := range []string{"hw.gpu.utilization", "hw.power", "hw.gpu.memory.usage"} {
			_, ok := metricIn(good, name)
			assert.True(t, ok, "healthy GPU keeps %s", name)
		}
		failing := resourceByUUID(t, md, bad.UUID)
		for _, name := range []string{"hw.power", "hw.gpu.memory.usage"} {
			_, ok := metricIn(failing, name)
			assert.False(t, ok, "failing GPU has no %s", name)
		}
		_, ok := metricIn(failing, "hw.temperature")
		assert.True(t, ok, "fields that still answer are kept")
	}
	metadatatest.AssertEqualReceiverNvmlDeviceErrors(t, env.tt,
		[]metricdata.DataPoint[int64]{{Value: 3 * scrapes}}, metricdatatest.IgnoreTimestamp())
	// Warnings are rate-limited: warnLimit per field, not one per scrape.
	warns := env.logs.FilterLevelExact(zapcore.WarnLevel)
	assert.Equal(t, 3*warnLimit, warns.Len())
	assert.Equal(t, 3, warns.FilterMessageSnippet("suppressing").Len())
	// Errors are not "unsupported": the field is asked again and comes back when the GPU does.
	lost = false
	md, err = env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	assert.InDelta(t, 1.0, point(t, resourceByUUID(t, md, bad.UUID), "hw.power", "W"), 1e-9)
}

func TestNoDriverWarnsOnceStaysIdleAndRetries(t *testing.T) {
	srv, _ := newMockServer(1)
	initRet := nvml.ERROR_LIBRARY_NOT_FOUND
	srv.InitFunc = func() nvml.Return { return initRet }
	env := newTestEnv(t, srv, func(c *Config) { c.InitRetryInterval = time.Minute })
	env.src.wantLogs()
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	for range 3 {
		md, err := env.src.scrapeMetrics(t.Context())
		require.NoError(t, err)
		assert.Zero(t, md.MetricCount())
		logs, err := env.src.scrapeLogs(t.Context())
		require.NoError(t, err)
		assert.Zero(t, logs.LogRecordCount())
		env.now = env.now.Add(30 * time.Second)
	}
	warns := env.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0].Message, "NVML is not available")
	assert.Equal(t, "ERROR_LIBRARY_NOT_FOUND", warns[0].ContextMap()["nvml_error"])
	assert.Len(t, srv.InitCalls(), 2, "Init retried once per init_retry_interval, not per scrape")

	// The driver appears: the next retry picks the GPUs up.
	initRet = nvml.SUCCESS
	env.now = env.now.Add(time.Minute)
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	resourceByUUID(t, md, uuidOf(srv, 0))
	require.NoError(t, env.src.shutdown(t.Context()))
	assert.Len(t, srv.ShutdownCalls(), 1)
}

func TestShutdownWithoutStart(t *testing.T) {
	srv, _ := newMockServer(1)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.shutdown(t.Context()))
	require.NoError(t, env.src.shutdown(t.Context()))
	assert.Empty(t, srv.ShutdownCalls())
}

func TestDisabledMetricsAreNotQueried(t *testing.T) {
	srv, _ := newMockServer(1)
	d := srv.Devices[0].(*server.Device)
	env := newTestEnv(t, srv, func(c *Config) {
		c.MetricsBuilderConfig.Metrics.HwPower.Enabled = false
		c.MetricsBuilderConfig.Metrics.NvidiaGpuThrottle.Enabled = false
	})
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	rm := resourceByUUID(t, md, d.UUID)
	_, ok := metricIn(rm, "hw.power")
	assert.False(t, ok)
	assert.Empty(t, d.GetPowerUsageCalls())
	assert.Empty(t, d.GetCurrentClocksThrottleReasonsCalls())
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestPCIeThroughputFallback(t *testing.T) {
	srv, _ := newMockServer(1)
	d := srv.Devices[0].(*server.Device)
	inner := d.GetFieldValuesFunc
	d.GetFieldValuesFunc = func(fvs []nvml.FieldValue) nvml.Return {
		ret := inner(fvs)
		for i := range fvs {
			if fvs[i].FieldId == nvml.FI_DEV_PCIE_COUNT_TX_BYTES || fvs[i].FieldId == nvml.FI_DEV_PCIE_COUNT_RX_BYTES {
				fvs[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return ret
	}
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return 100, nvml.SUCCESS // KiB/s
		}
		return 50, nvml.SUCCESS
	}
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	_, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	env.now = env.now.Add(10 * time.Second)
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	rm := resourceByUUID(t, md, d.UUID)
	assert.InDelta(t, 100*1024*10, point(t, rm, "hw.gpu.io", "By", "nvidia.gpu.interconnect", "pcie", "network.io.direction", "transmit"), 0)
	assert.InDelta(t, 50*1024*10, point(t, rm, "hw.gpu.io", "By", "nvidia.gpu.interconnect", "pcie", "network.io.direction", "receive"), 0)
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestMIGEnabledAttribute(t *testing.T) {
	srv, _ := newMockServer(1)
	d := srv.Devices[0].(*server.Device)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	v, _ := resourceByUUID(t, md, d.UUID).Resource().Attributes().Get("nvidia.gpu.mig.mode")
	assert.Equal(t, "enabled", v.Str())
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestXIDMeaningsCoverWellKnownCodes(t *testing.T) {
	for _, code := range []uint64{13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120} {
		assert.NotEmpty(t, xidMeaning(code), "XID %d", code)
	}
	assert.Empty(t, xidMeaning(1))
	assert.True(t, strings.Contains(xidMeaning(48), "ECC"))
}

func TestEventsDisabledCreatesNoEventSet(t *testing.T) {
	srv, _ := newMockServer(1)
	env := newTestEnv(t, srv, func(c *Config) { c.Events.Enabled = false })
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	_, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	assert.Empty(t, srv.EventSetCreateCalls())
	assert.Empty(t, srv.Devices[0].(*server.Device).RegisterEventsCalls())
	require.NoError(t, env.src.shutdown(t.Context()))
}

func TestEventsRegisteredWithSupportedCriticalMask(t *testing.T) {
	srv, _ := newMockServer(1)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	calls := srv.Devices[0].(*server.Device).RegisterEventsCalls()
	require.Len(t, calls, 1)
	// The mock supports XID, DBE and SBE; single-bit ECC is not critical and is left out.
	assert.Equal(t, uint64(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError), calls[0].V)
	require.NoError(t, env.src.shutdown(t.Context()))
}
