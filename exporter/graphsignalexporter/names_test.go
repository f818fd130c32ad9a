// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/names"
)

const (
	gpuUUID  = "GPU-5a3f0c1e-8e2b-4c1d-9f7a-0123456789ab"
	gpuBusID = "00000000:1B:00.0"
)

// nvmlResource is the resource the nvml receiver puts on a device's
// metrics and logs (receiver/nvmlreceiver/scraper.go fillResource).
func nvmlResource(r pcommon.Resource) {
	a := r.Attributes()
	a.PutStr("host.name", "gpu-node-1")
	a.PutStr("hw.id", gpuUUID)
	a.PutStr("hw.name", "NVIDIA H200")
	a.PutStr("hw.type", "gpu")
	a.PutStr("hw.vendor", "NVIDIA")
	a.PutStr("hw.driver_version", "550.54.15")
	a.PutInt("nvidia.gpu.index", 0)
	a.PutStr("nvidia.gpu.pci.bus_id", gpuBusID)
	a.PutStr("nvidia.gpu.architecture", "hopper")
	a.PutStr("nvidia.gpu.compute_capability", "9.0")
	a.PutStr("nvidia.gpu.cuda_driver_version", "12.4")
	a.PutStr("nvidia.gpu.mig.mode", "disabled")
}

// nvmlScrape is one scrape of the nvml receiver, shaped as its generated
// MetricsBuilder emits it: gauges, and cumulative sums since start.
type nvmlScrape struct {
	start, ts    time.Time
	util, memAct float64 // fractions
	pcieTx       int64   // bytes since start
	nvlinkRx     int64   // bytes since start
	xid79, xid48 int64
	crcFlit      int64
	crcData      int64
	throttled    []string
}

func (s nvmlScrape) build() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	nvmlResource(rm.Resource())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("github.com/inferprof/inferprof/receiver/nvmlreceiver")
	ms := sm.Metrics()
	ts := pcommon.NewTimestampFromTime(s.ts)
	gauge := func(name string, v float64, attrs ...string) {
		m := ms.AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(v)
		for i := 0; i+1 < len(attrs); i += 2 {
			dp.Attributes().PutStr(attrs[i], attrs[i+1])
		}
	}
	sum := func(name string, monotonic bool) pmetric.NumberDataPointSlice {
		m := ms.AppendEmpty()
		m.SetName(name)
		sm := m.SetEmptySum()
		sm.SetIsMonotonic(monotonic)
		sm.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return sm.DataPoints()
	}
	point := func(dps pmetric.NumberDataPointSlice, v int64, attrs ...any) {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.start))
		dp.SetTimestamp(ts)
		dp.SetIntValue(v)
		for i := 0; i+1 < len(attrs); i += 2 {
			switch v := attrs[i+1].(type) {
			case string:
				dp.Attributes().PutStr(attrs[i].(string), v)
			case int:
				dp.Attributes().PutInt(attrs[i].(string), int64(v))
			}
		}
	}
	gauge("hw.gpu.utilization", s.util, "hw.gpu.task", "general")
	gauge("hw.gpu.utilization", 0.25, "hw.gpu.task", "encoder")
	gauge("nvidia.gpu.memory.activity", s.memAct)
	gauge("hw.power", 412.5)
	gauge("hw.temperature", 61)
	gauge("nvidia.gpu.fan.speed", 0.4)
	gauge("hw.gpu.memory.utilization", 0.5)
	clk := ms.AppendEmpty()
	clk.SetName("nvidia.gpu.clock.frequency")
	cdps := clk.SetEmptyGauge().DataPoints()
	for _, c := range []struct {
		domain string
		hz     int64
	}{{"sm", 1_980_000_000}, {"memory", 2_619_000_000}} {
		p := cdps.AppendEmpty()
		p.SetTimestamp(ts)
		p.SetIntValue(c.hz)
		p.Attributes().PutStr("nvidia.gpu.clock", c.domain)
	}
	thr := ms.AppendEmpty()
	thr.SetName("nvidia.gpu.throttle")
	tdps := thr.SetEmptyGauge().DataPoints()
	for _, reason := range []string{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
		"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"} {
		p := tdps.AppendEmpty()
		p.SetTimestamp(ts)
		var on int64
		for _, r := range s.throttled {
			if r == reason {
				on = 1
			}
		}
		p.SetIntValue(on)
		p.Attributes().PutStr("nvidia.gpu.throttle.reason", reason)
	}
	point(sum("hw.gpu.memory.usage", false), 60<<30)
	point(sum("hw.gpu.memory.limit", false), 141<<30)
	io := sum("hw.gpu.io", true)
	point(io, s.pcieTx, "nvidia.gpu.interconnect", "pcie", "network.io.direction", "transmit")
	point(io, s.nvlinkRx, "nvidia.gpu.interconnect", "nvlink", "network.io.direction", "receive")
	xid := sum("nvidia.gpu.xid.errors", true)
	point(xid, s.xid79, names.AttrXID, 79)
	point(xid, s.xid48, names.AttrXID, 48)
	nvl := sum("nvidia.gpu.nvlink.errors", true)
	point(nvl, s.crcFlit, "nvidia.gpu.nvlink.error.type", "crc_flit")
	point(nvl, s.crcData, "nvidia.gpu.nvlink.error.type", "crc_data")
	return md
}

type graphsignaltestUpload = graphsignaltest.Upload

func uploadsOf(h *harness) []*graphsignaltestUpload { return h.srv.Accepted() }

func graphsignalHarness(t *testing.T, mod func(*Config)) *harness {
	return newHarness(t, func(cfg *Config) {
		cfg.Names = encode.NamesGraphsignal
		if mod != nil {
			mod(cfg)
		}
	})
}

func metricsNamed(ups []*graphsignaltestUpload, name string) []*signalsv1.Metric {
	var out []*signalsv1.Metric
	for _, u := range ups {
		for _, m := range u.V1.GetMetrics() {
			if m.GetName() == name {
				out = append(out, m)
			}
		}
	}
	return out
}

func gaugeOf(t *testing.T, ups []*graphsignaltestUpload, name string) float64 {
	t.Helper()
	ms := metricsNamed(ups, name)
	require.NotEmptyf(t, ms, "%s not uploaded", name)
	return ms[len(ms)-1].Datapoints[len(ms[len(ms)-1].Datapoints)-1].GetGauge()
}

func totalOf(ups []*graphsignaltestUpload, name string) float64 {
	var sum float64
	for _, m := range metricsNamed(ups, name) {
		for _, dp := range m.Datapoints {
			sum += dp.GetTotal()
		}
	}
	return sum
}

// TestGraphsignalNamesNVML is the schema test for the nvml receiver's
// metrics: every upload decodes with Graphsignal's schema (the fake checks
// it) and carries Graphsignal's names, units and scales.
func TestGraphsignalNamesNVML(t *testing.T) {
	h := graphsignalHarness(t, nil)
	start := time.Now().Add(-time.Minute)
	first := nvmlScrape{start: start, ts: start.Add(10 * time.Second), util: 0.63, memAct: 0.21,
		pcieTx: 10 << 20, nvlinkRx: 1 << 30, throttled: []string{"sw_power_cap", "hw_slowdown"}}
	second := first
	second.ts = first.ts.Add(10 * time.Second)
	second.util, second.memAct = 0.97, 0.5
	second.pcieTx = first.pcieTx + 50<<20 // 50 MiB in 10 s
	second.nvlinkRx = first.nvlinkRx + 2<<30
	second.xid79, second.xid48 = 2, 1
	second.crcFlit, second.crcData = 3, 4
	second.throttled = nil
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), first.build()))
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), second.build()))
	require.Empty(t, h.srv.Malformed())
	ups := uploadsOf(h)
	require.Len(t, ups, 2)

	// Scale: fractions become percent, Hz MHz, bytes KiB, W and °C as they are.
	assert.InDelta(t, 63.0, gaugeOf(t, ups[:1], "gpu_utilization_percent"), 1e-9)
	assert.InDelta(t, 97.0, gaugeOf(t, ups, "gpu_utilization_percent"), 1e-9)
	assert.InDelta(t, 50.0, gaugeOf(t, ups, "gpu_memory_utilization_percent"), 1e-9)
	assert.InDelta(t, 40.0, gaugeOf(t, ups, "gpu_fan_speed_percent"), 1e-9)
	assert.InDelta(t, 412.5, gaugeOf(t, ups, "gpu_power_usage_watts"), 0)
	assert.InDelta(t, 61.0, gaugeOf(t, ups, "gpu_temperature_celsius"), 0)
	assert.InDelta(t, 1980.0, gaugeOf(t, ups, "gpu_clock_sm_megahertz"), 1e-9)
	assert.InDelta(t, 2619.0, gaugeOf(t, ups, "gpu_clock_mem_megahertz"), 1e-9)
	assert.InDelta(t, float64(60<<30), gaugeOf(t, ups, "gpu_memory_used_bytes"), 0)
	assert.InDelta(t, float64(141<<30), gaugeOf(t, ups, "gpu_memory_total_bytes"), 0)
	// The PCIe byte counter is a KiB/s rate over the interval between scrapes.
	assert.InDelta(t, 50.0*1024/10, gaugeOf(t, ups[1:], "gpu_pcie_throughput_tx_kilobytes_per_second"), 1e-6)
	// NVLink: KiB. The series began before the exporter, so the first scrape
	// is the baseline and only the increase goes up.
	assert.InDelta(t, float64(2<<30)/1024, totalOf(ups, "gpu_nvlink_throughput_data_rx_kibibytes"), 1e-6)
	// Throttle reasons: NVML's bitmask (sw_power_cap 0x4 | hw_slowdown 0x8), then 0.
	assert.InDelta(t, 12.0, gaugeOf(t, ups[:1], "gpu_clocks_throttle_reasons"), 0)
	assert.InDelta(t, 0.0, gaugeOf(t, ups[1:], "gpu_clocks_throttle_reasons"), 0)
	// XID codes summed per device; flit and data CRC errors summed.
	assert.InDelta(t, 3.0, totalOf(ups, "gpu_xid_critical_errors"), 0)
	xm := metricsNamed(ups, "gpu_xid_critical_errors")
	require.Len(t, xm, 1)
	assert.Len(t, xm[0].Datapoints, 1, "one counter per device, codes folded")
	assert.InDelta(t, 7.0, totalOf(ups, "gpu_nvlink_errors_crc"), 0)
	// No Graphsignal equivalent: kept as they are.
	assert.NotEmpty(t, metricsNamed(ups, "hw.gpu.memory.utilization"))
	enc := metricsNamed(ups, "hw.gpu.utilization")
	require.NotEmpty(t, enc)
	assert.Equal(t, "encoder", tags(enc[0].Tags)["hw.gpu.task"])
	for _, old := range []string{"hw.power", "hw.temperature", "nvidia.gpu.throttle", "nvidia.gpu.clock.frequency", "hw.gpu.io", "nvidia.gpu.xid.errors"} {
		assert.Emptyf(t, metricsNamed(ups, old), "%s went up under its own name", old)
	}

	// Tags: Graphsignal's device tags; the device's description is on the
	// device resource, not on every metric.
	util := metricsNamed(ups, "gpu_utilization_percent")[0]
	tg := tags(util.Tags)
	assert.Equal(t, gpuUUID, tg["device.uuid"])
	assert.Equal(t, gpuBusID, tg["device.bus_id"])
	assert.Equal(t, "gpu-node-1", tg["host.name"])
	for k := range tg {
		assert.NotRegexp(t, `^(hw\.|nvidia\.gpu\.)`, k)
	}
	var device *signalsv1.Resource
	for _, r := range ups[1].V1.Resources {
		if r.Kind == "device" {
			device = r
		}
	}
	require.NotNil(t, device)
	dt := tags(device.Tags)
	assert.Equal(t, gpuUUID, dt["device.uuid"])
	assert.Equal(t, gpuBusID, dt["device.bus_id"])
	attrs := map[string]string{}
	for _, a := range device.Attributes {
		attrs[a.Name] = a.Value
	}
	assert.Equal(t, "NVIDIA H200", attrs["device.name"])
	assert.Equal(t, "hopper", attrs["architecture"])
	assert.Equal(t, "9.0", attrs["compute_capability"])
	assert.Equal(t, strconv.FormatInt(141<<30, 10), attrs["mem_total"])
	// first_seen stays, last_seen moves.
	var firstDevice *signalsv1.Resource
	for _, r := range ups[0].V1.Resources {
		if r.Kind == "device" {
			firstDevice = r
		}
	}
	require.NotNil(t, firstDevice)
	assert.Equal(t, firstDevice.FirstSeenTs, device.FirstSeenTs)
	assert.GreaterOrEqual(t, device.LastSeenTs, firstDevice.LastSeenTs)
}

// deltaSum appends a monotonic delta sum, as the cupti receiver's tables
// are, and returns its datapoints.
func deltaSum(ms pmetric.MetricSlice, name, unit string) pmetric.NumberDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	return s.DataPoints()
}

// cuptiMetrics is one interval of the cupti receiver's delta tables.
func cuptiMetrics(ts time.Time, kernels map[string]float64, device string, graphs bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "gpu-node-1")
	rm.Resource().Attributes().PutInt("process.pid", 4242)
	rm.Resource().Attributes().PutStr("inferprof.activity.source", "cupti")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	pts := pcommon.NewTimestampFromTime(ts)
	delta := func(name, unit string) pmetric.NumberDataPointSlice { return deltaSum(ms, name, unit) }
	add := func(dps pmetric.NumberDataPointSlice, v float64, attrs ...string) {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(ts.Add(-10 * time.Second)))
		dp.SetTimestamp(pts)
		dp.SetDoubleValue(v)
		dp.Attributes().PutStr(names.AttrDeviceID, device)
		for i := 0; i+1 < len(attrs); i += 2 {
			dp.Attributes().PutStr(attrs[i], attrs[i+1])
		}
	}
	dur, cnt := delta(names.MetricKernelDuration, "s"), delta(names.MetricKernelCount, "{kernel}")
	for k, sec := range kernels {
		add(dur, sec, names.AttrKernelName, k, names.AttrKernelCategory, "gemm")
		add(cnt, 2, names.AttrKernelName, k, names.AttrKernelCategory, "gemm")
	}
	cp := delta(names.MetricMemcpyDuration, "s")
	add(cp, 0.002, names.AttrMemcpyKind, "host_to_device")
	add(cp, 0.001, names.AttrMemcpyKind, "device_to_host")
	add(cp, 0.0005, names.AttrMemcpyKind, "unknown")
	cb := delta(names.MetricMemcpyBytes, "By")
	add(cb, 4096, names.AttrMemcpyKind, "host_to_device")
	add(cb, 1024, names.AttrMemcpyKind, "unknown")
	add(delta(names.MetricMemsetDuration, "s"), 0.0001, names.AttrMemoryKind, "device")
	add(delta(names.MetricMemsetBytes, "By"), 512, names.AttrMemoryKind, "device")
	add(delta(names.MetricSyncDuration, "s"), 0.003, names.AttrSyncKind, "stream")
	if graphs {
		// As the receiver emits them: one point per signature, a duration
		// and an int launch count.
		gd, gc := delta(names.MetricGraphDuration, "s"), delta(names.MetricGraphCount, "{launch}")
		for _, g := range testGraphs {
			add(gd, g.sec, names.AttrCUDAGraphSignature, g.sig)
			add(gc, 0, names.AttrCUDAGraphSignature, g.sig)
			gc.At(gc.Len() - 1).SetIntValue(g.launches)
		}
	}
	return md
}

// testGraphs are graph signatures as the cupti receiver writes them.
var testGraphs = []struct {
	sig      string
	sec      float64
	launches int64
}{
	{"9e3779b97f4a7c15", 0.03, 3},
	{"00000000000000ff", 0.015, 2},
	{"unknown", 0.005, 1},
}

// frameValues is a profile's value and samples per frame.
var frameValues = graphsignaltest.FrameValues

// TestGraphsignalNamesCUPTI is the schema test for the cupti receiver's
// tables: Graphsignal's profiles and counters, and its 250-frame cap.
func TestGraphsignalNamesCUPTI(t *testing.T) {
	h := graphsignalHarness(t, nil)
	ts := time.Now()
	kernels := map[string]float64{}
	for i := 0; i < 300; i++ {
		kernels[fmt.Sprintf("kernel_%03d", i)] = float64(i+1) * 1e-6
	}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), cuptiMetrics(ts, kernels, "0", true)))
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), cuptiMetrics(ts.Add(10*time.Second), kernels, "0", true)))
	require.Empty(t, h.srv.Malformed())
	ups := uploadsOf(h)
	require.Len(t, ups, 2)

	// Kernels: at most 250 frames, the rest in "other"; nothing lost.
	var want float64
	for _, s := range kernels {
		want += s * 1e9
	}
	kp := metricsNamed(ups, "cuda_kernels_nanoseconds")
	require.Len(t, kp, 2, "one profile per upload: the category is not a tag")
	for _, m := range kp {
		assert.Equal(t, signalsv1.Metric_PROFILE_METRIC, m.Type)
		assert.Len(t, m.Frames, 250)
		assert.NotContains(t, tags(m.Tags), names.AttrKernelCategory)
		assert.Equal(t, "4242", tags(m.Tags)["process.pid"])
	}
	fv := frameValues(kp[0])
	var got uint64
	for _, v := range fv {
		got += v[0]
	}
	assert.InDelta(t, want, float64(got), 300, "frame values sum to the kernel time (rounding per frame)")
	assert.Equal(t, uint64(2*51), fv["other"][1], "51 kernels past 249 are counted in other")
	// The same kernels keep their own frames in the next upload.
	first, second := frameValues(kp[0]), frameValues(kp[1])
	for name := range first {
		assert.Containsf(t, second, name, "frame %s flipped", name)
	}

	mc := frameValues(metricsNamed(ups, "cuda_memcpy_nanoseconds")[0])
	assert.Equal(t, map[string][2]uint64{
		"host_to_device": {2_000_000, 0}, "device_to_host": {1_000_000, 0}, "other": {500_000, 0},
	}, mc, "one frame per copy kind, unknown spelled as Graphsignal does")
	assert.Equal(t, map[string][2]uint64{"device": {100_000, 0}}, frameValues(metricsNamed(ups, "cuda_memset_nanoseconds")[0]))
	assert.Equal(t, map[string][2]uint64{"stream": {3_000_000, 0}}, frameValues(metricsNamed(ups, "cuda_sync_nanoseconds")[0]))
	gp := metricsNamed(ups, "cuda_graphs_nanoseconds")
	require.Len(t, gp, 2)
	assert.Equal(t, map[string][2]uint64{
		"9e3779b97f4a7c15": {30_000_000, 3}, "00000000000000ff": {15_000_000, 2}, "unknown": {5_000_000, 1},
	}, frameValues(gp[0]), "one frame per graph signature, samples = launches")
	assert.NotContains(t, tags(gp[0].Tags), names.AttrCUDAGraphSignature)
	assert.InDelta(t, 0.0, gaugeOf(t, ups, "cuda_graph_trace_mode"), 0)

	bytesByKind := map[string]float64{}
	for _, m := range metricsNamed(ups[:1], "cuda_memcpy_bytes") {
		assert.Equal(t, signalsv1.Metric_COUNTER_METRIC, m.Type)
		bytesByKind[tags(m.Tags)["kind"]] += m.Datapoints[0].GetTotal()
		assert.NotContains(t, tags(m.Tags), names.AttrMemcpyKind)
	}
	assert.Equal(t, map[string]float64{"host_to_device": 4096, "other": 1024}, bytesByKind)
	ms := metricsNamed(ups[:1], "cuda_memset_bytes")
	require.Len(t, ms, 1)
	assert.Equal(t, "device", tags(ms[0].Tags)["kind"])

	// The CUDA ordinal is not a device UUID: no device resource from it.
	for _, r := range ups[0].V1.Resources {
		assert.NotEqual(t, "device", r.Kind)
	}
	for _, old := range []string{names.MetricMemcpyDuration, names.MetricMemcpyBytes, names.MetricSyncDuration} {
		assert.Empty(t, metricsNamed(ups, old))
	}

	// A library that says its mode (node) on the resource: the gauge is 1,
	// and the mode is not a tag.
	md := cuptiMetrics(ts.Add(20*time.Second), map[string]float64{"gemm": 0.001}, "0", false)
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("inferprof.cupti.graph_mode", "node")
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), md))
	last := uploadsOf(h)[2:]
	assert.InDelta(t, 1.0, gaugeOf(t, last, "cuda_graph_trace_mode"), 0)
	for _, m := range last[0].V1.Metrics {
		assert.NotContains(t, tags(m.Tags), "inferprof.cupti.graph_mode")
	}
}

// TestGraphsignalNamesLogs: an XID goes up as Graphsignal logs it; engine
// errors keep their level.
func TestGraphsignalNamesLogs(t *testing.T) {
	h := graphsignalHarness(t, nil)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	nvmlResource(rl.Resource())
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	// As the nvml receiver writes an XID (scraper.go fillEventRecord).
	lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	lr.SetEventName(names.EventNameXID)
	lr.Attributes().PutStr(names.AttrDeviceID, gpuUUID)
	lr.Attributes().PutStr(names.AttrGPUEventType, "xid")
	lr.Attributes().PutInt(names.AttrXID, 79)
	lr.Attributes().PutStr(names.AttrXIDMeaning, "GPU has fallen off the bus")
	lr.Body().SetStr("XID 79 on GPU 0 (" + gpuUUID + "): GPU has fallen off the bus")
	erl := ld.ResourceLogs().AppendEmpty()
	erl.Resource().Attributes().PutStr("service.name", "vllm")
	for _, sev := range []plog.SeverityNumber{plog.SeverityNumberWarn, plog.SeverityNumberError, plog.SeverityNumberFatal} {
		r := erl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		r.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		r.SetSeverityNumber(sev)
		r.Body().SetStr("engine " + sev.String())
	}
	require.NoError(t, h.logsExp.ConsumeLogs(t.Context(), ld))
	require.Empty(t, h.srv.Malformed())
	ups := uploadsOf(h)
	require.Len(t, ups, 1)
	levels := map[string]signalsv1.LogEntry_LogLevel{}
	var xidTags map[string]string
	for _, lb := range ups[0].V1.LogBatches {
		for _, e := range lb.LogEntries {
			levels[e.Message] = e.Level
			if e.Message == "XID error 79" {
				xidTags = tags(lb.Tags)
			}
		}
	}
	assert.Equal(t, map[string]signalsv1.LogEntry_LogLevel{
		"XID error 79": signalsv1.LogEntry_ERROR_LEVEL,
		"engine " + plog.SeverityNumberWarn.String():  signalsv1.LogEntry_WARNING_LEVEL,
		"engine " + plog.SeverityNumberError.String(): signalsv1.LogEntry_ERROR_LEVEL,
		"engine " + plog.SeverityNumberFatal.String(): signalsv1.LogEntry_CRITICAL_LEVEL,
	}, levels)
	require.NotNil(t, xidTags)
	assert.Equal(t, gpuUUID, xidTags["device.uuid"])
	assert.Equal(t, gpuBusID, xidTags["device.bus_id"])
	for k := range xidTags {
		assert.NotRegexp(t, `^(hw\.|nvidia\.gpu\.)`, k)
	}
}

// TestGraphsignalNamesPrometheusAndProcesses: engine metrics scraped by the
// prometheus receiver keep the names Graphsignal's Prometheus import gives
// them; process resources carry process.root_pid.
func TestGraphsignalNamesPrometheusAndProcesses(t *testing.T) {
	h := graphsignalHarness(t, nil)
	// The engine started after the exporter: its first totals go up whole.
	start := time.Now()
	build := func(pid, parent int, v int64, ts time.Time) pmetric.Metrics {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		a := rm.Resource().Attributes()
		a.PutStr("service.name", "vllm")
		a.PutStr("host.name", "gpu-node-1")
		a.PutInt("process.pid", int64(pid))
		if parent != 0 {
			a.PutInt("process.parent_pid", int64(parent))
		}
		a.PutStr("process.creation.time", start.Add(-time.Hour).UTC().Format(time.RFC3339Nano))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver")
		m := sm.Metrics().AppendEmpty()
		// vLLM's prometheus_client counter, as the receiver names it.
		m.SetName("vllm:prompt_tokens_total")
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetIntValue(v)
		dp.Attributes().PutStr("model_name", "meta-llama/Llama-3.1-8B-Instruct")
		dp.Attributes().PutStr("pid", strconv.Itoa(pid))
		return md
	}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), build(100, 1, 10, start.Add(time.Second))))
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), build(200, 100, 5, start.Add(2*time.Second))))
	require.Empty(t, h.srv.Malformed())
	ups := uploadsOf(h)
	require.Len(t, ups, 2)
	pm := metricsNamed(ups, "vllm:prompt_tokens")
	require.Len(t, pm, 2, "prometheus_client's family name, without _total")
	assert.NotContains(t, tags(pm[0].Tags), "pid", "Graphsignal's import strips pid")
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", tags(pm[0].Tags)["model_name"])
	roots := map[string]string{}
	for _, u := range ups {
		for _, r := range u.V1.Resources {
			if r.Kind == "process" {
				tg := tags(r.Tags)
				roots[tg["process.pid"]] = tg["process.root_pid"]
				assert.Equal(t, start.Add(-time.Hour).UnixNano(), r.FirstSeenTs, "first_seen is the process start")
			}
		}
	}
	assert.Equal(t, map[string]string{"100": "100", "200": "100"}, roots, "the worker points at its server")
}

// TestSignalsServeUploadedNames: /signals serves the names the upload
// carries.
func TestSignalsServeUploadedNames(t *testing.T) {
	h := graphsignalHarness(t, nil)
	start := time.Now().Add(-time.Minute)
	s := nvmlScrape{start: start, ts: start.Add(10 * time.Second), util: 0.5, memAct: 0.1}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), s.build()))
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), cuptiMetrics(time.Now(), map[string]float64{"gemm": 0.001}, "0", false)))
	uploaded := map[string]bool{}
	for _, u := range uploadsOf(h) {
		for _, m := range u.V1.Metrics {
			uploaded[m.Name] = true
		}
	}
	resp, err := http.Get(h.localURL() + "/signals")
	require.NoError(t, err)
	defer resp.Body.Close()
	var doc struct {
		Metrics []struct {
			Name  string         `json:"name"`
			Stats map[string]any `json:"stats"`
		} `json:"metrics"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	served := map[string]bool{}
	for _, m := range doc.Metrics {
		served[m.Name] = true
		if m.Name == "gpu_utilization_percent" {
			assert.InDelta(t, 50.0, m.Stats["value"], 1e-9)
		}
	}
	assert.Equal(t, uploaded, served)
	assert.True(t, served["gpu_utilization_percent"])
	assert.True(t, served["cuda_kernels_nanoseconds"])
}
