// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inferprof/inferprof/internal/names"
)

// Names selects the names signals are uploaded and served under.
type Names string

const (
	// NamesGraphsignal uses the names, units and scales of Graphsignal's own
	// profiler (its "gen C" watcher), so Graphsignal's GPU and CUDA views
	// fill in. The default.
	NamesGraphsignal Names = "graphsignal"
	// NamesSource keeps the OpenTelemetry names inferprof's components emit.
	NamesSource Names = "source"
)

// UnmarshalText makes a bad value fail when the config is loaded.
func (n *Names) UnmarshalText(b []byte) error {
	switch v := Names(b); v {
	case NamesGraphsignal, NamesSource:
		*n = v
		return nil
	}
	return fmt.Errorf("names: %q is not graphsignal or source", string(b))
}

// ruleKind says how a source metric becomes a Graphsignal one.
type ruleKind int

const (
	// kindKeep: Graphsignal has no such metric; it goes up under its own
	// name, unit and scale.
	kindKeep ruleKind = iota
	// kindRename: same type, Graphsignal's name, value times Scale.
	kindRename
	// kindRate: a counter's increase per second over the delta's interval,
	// times Scale, as a gauge.
	kindRate
	// kindBitmask: one 0/1 gauge per reason folded into one bitmask gauge.
	kindBitmask
	// kindProfile: a duration counter becomes a profile, one frame per
	// value of the Frame attribute, values in nanoseconds.
	kindProfile
	// kindSamples: a count counter gives the samples of a profile's frames.
	kindSamples
)

// rule maps one source metric (or the datapoints of it that carry Match)
// to Graphsignal's name.
type rule struct {
	Source string
	Match  []kv // attributes a datapoint must carry; consumed (not tags)
	Kind   ruleKind
	Target string  // Graphsignal's name; empty for kindKeep
	Scale  float64 // 0 means 1
	// Frame names the attribute whose value is the frame (kindProfile,
	// kindSamples); empty means one frame, "other".
	Frame string
	// FrameDefault is the frame of a datapoint without the Frame attribute
	// (one from a collector that predates it); empty skips the datapoint.
	FrameDefault string
	// Tag renames a datapoint attribute to a Graphsignal tag key (from, to).
	Tag kv
	// Drop lists more datapoint attributes that are not tags.
	Drop []string
	// Bits maps Match[0]'s values to bits (kindBitmask); the reason
	// attribute is named in BitAttr.
	BitAttr string
	Bits    map[string]uint64
	// ValueRename maps frame or tag values to Graphsignal's spelling.
	ValueRename map[string]string
	// DeviceAttr records the value on the device resource under this name.
	DeviceAttr string
	// ModeGauge also sends cuda_graph_trace_mode = 0 (graph mode) for each
	// profile this rule feeds when the resource does not say the mode:
	// GRAPH_TRACE records only exist in that mode.
	ModeGauge bool
	Note      string // for the README
}

// Graphsignal's names, from its gen C watcher (graphsignal/graphsignal at
// version 1.0.0, read through the giveen/graphsignal fork):
// recorders/nvml_recorder.py @ b76d851 for the GPU metrics and XID errors,
// src/cupti/cupti_activity.cpp @ 40f84e6 for the CUDA profiles and
// counters; see ../shared/reference/graphsignal.md §4.
const (
	ProfileKernels = "cuda_kernels_nanoseconds"
	profileMemcpy  = "cuda_memcpy_nanoseconds"
	profileMemset  = "cuda_memset_nanoseconds"
	profileSync    = "cuda_sync_nanoseconds"
	profileGraphs  = "cuda_graphs_nanoseconds"
	gaugeGraphMode = "cuda_graph_trace_mode"
	counterXID     = "gpu_xid_critical_errors"
	frameOther     = "other"
	// frameUnknownGraph is the cupti receiver's graph signature for a launch
	// whose graph it has no signature for.
	frameUnknownGraph = "unknown"
	// maxFrames is Graphsignal's writer cap, kMaxProfileFrames
	// (src/common/metrics_writer.h @ 82849ec).
	maxFrames = 250
)

// cuptiMemcpyOther is how Graphsignal's memcpyKindToStr spells a copy kind
// it does not know; our receiver says "unknown".
var cuptiMemcpyOther = map[string]string{"unknown": frameOther}

// nvmlThrottleBits are NVML's nvmlClocksEventReason* bits (nvml.h), the
// bitmask Graphsignal uploads as gpu_clocks_throttle_reasons.
var nvmlThrottleBits = map[string]uint64{
	"gpu_idle":                    0x1,
	"applications_clocks_setting": 0x2,
	"sw_power_cap":                0x4,
	"hw_slowdown":                 0x8,
	"sync_boost":                  0x10,
	"sw_thermal_slowdown":         0x20,
	"hw_thermal_slowdown":         0x40,
	"hw_power_brake_slowdown":     0x80,
	"display_clock_setting":       0x100,
}

// graphsignalTable is the name map of names: graphsignal: every metric the
// nvml and cupti receivers emit, in the order the README lists them.
var graphsignalTable = []rule{
	// nvml receiver (receiver/nvmlreceiver/metadata.yaml).
	{Source: "hw.gpu.utilization", Match: []kv{{"hw.gpu.task", "general"}}, Kind: kindRename, Target: "gpu_utilization_percent", Scale: 100, Note: "fraction → percent"},
	{Source: "hw.gpu.utilization", Match: []kv{{"hw.gpu.task", "encoder"}}, Kind: kindKeep, Note: "Graphsignal has no encoder utilization"},
	{Source: "hw.gpu.utilization", Match: []kv{{"hw.gpu.task", "decoder"}}, Kind: kindKeep, Note: "Graphsignal has no decoder utilization"},
	{Source: "nvidia.gpu.memory.activity", Kind: kindRename, Target: "gpu_memory_utilization_percent", Scale: 100, Note: "fraction → percent; NVML's memory utilization"},
	{Source: "hw.gpu.memory.usage", Kind: kindRename, Target: "gpu_memory_used_bytes"},
	{Source: "hw.gpu.memory.limit", Kind: kindRename, Target: "gpu_memory_total_bytes", DeviceAttr: "mem_total", Note: "also the device resource's `mem_total`"},
	{Source: "hw.gpu.memory.utilization", Kind: kindKeep, Note: "used ÷ total; Graphsignal's memory utilization is NVML's activity (above)"},
	{Source: "hw.power", Kind: kindRename, Target: "gpu_power_usage_watts"},
	{Source: "hw.energy", Kind: kindKeep, Note: "Graphsignal has no energy counter"},
	{Source: "hw.temperature", Kind: kindRename, Target: "gpu_temperature_celsius"},
	{Source: "nvidia.gpu.fan.speed", Kind: kindRename, Target: "gpu_fan_speed_percent", Scale: 100, Note: "fraction → percent"},
	{Source: "nvidia.gpu.clock.frequency", Match: []kv{{"nvidia.gpu.clock", "sm"}}, Kind: kindRename, Target: "gpu_clock_sm_megahertz", Scale: 1e-6, Note: "Hz → MHz"},
	{Source: "nvidia.gpu.clock.frequency", Match: []kv{{"nvidia.gpu.clock", "memory"}}, Kind: kindRename, Target: "gpu_clock_mem_megahertz", Scale: 1e-6, Note: "Hz → MHz"},
	{Source: "nvidia.gpu.performance_state", Kind: kindRename, Target: "gpu_performance_state"},
	{Source: "nvidia.gpu.throttle", Kind: kindBitmask, Target: "gpu_clocks_throttle_reasons", BitAttr: "nvidia.gpu.throttle.reason", Bits: nvmlThrottleBits, Note: "one 0/1 series per reason → NVML's bitmask"},
	{Source: "hw.errors", Match: []kv{{"error.type", "corrected"}}, Kind: kindRename, Target: "gpu_ecc_errors_corrected_volatile"},
	{Source: "hw.errors", Match: []kv{{"error.type", "uncorrected"}}, Kind: kindRename, Target: "gpu_ecc_errors_uncorrected_volatile"},
	{Source: "hw.errors", Match: []kv{{"error.type", "pcie_replay"}}, Kind: kindRename, Target: "gpu_pcie_replay_counter"},
	{Source: "hw.gpu.io", Match: []kv{{"nvidia.gpu.interconnect", "pcie"}, {"network.io.direction", "transmit"}}, Kind: kindRate, Target: "gpu_pcie_throughput_tx_kilobytes_per_second", Scale: 1.0 / 1024, Note: "bytes counter → KiB/s gauge over each interval, as NVML reports PCIe throughput"},
	{Source: "hw.gpu.io", Match: []kv{{"nvidia.gpu.interconnect", "pcie"}, {"network.io.direction", "receive"}}, Kind: kindRate, Target: "gpu_pcie_throughput_rx_kilobytes_per_second", Scale: 1.0 / 1024, Note: "bytes counter → KiB/s gauge over each interval"},
	{Source: "hw.gpu.io", Match: []kv{{"nvidia.gpu.interconnect", "nvlink"}, {"network.io.direction", "transmit"}}, Kind: kindRename, Target: "gpu_nvlink_throughput_data_tx_kibibytes", Scale: 1.0 / 1024, Note: "bytes → KiB (NVML's unit)"},
	{Source: "hw.gpu.io", Match: []kv{{"nvidia.gpu.interconnect", "nvlink"}, {"network.io.direction", "receive"}}, Kind: kindRename, Target: "gpu_nvlink_throughput_data_rx_kibibytes", Scale: 1.0 / 1024, Note: "bytes → KiB (NVML's unit)"},
	{Source: "nvidia.gpu.nvlink.errors", Match: []kv{{"nvidia.gpu.nvlink.error.type", "replay"}}, Kind: kindRename, Target: "gpu_nvlink_errors_replay"},
	{Source: "nvidia.gpu.nvlink.errors", Match: []kv{{"nvidia.gpu.nvlink.error.type", "recovery"}}, Kind: kindRename, Target: "gpu_nvlink_errors_recovery"},
	{Source: "nvidia.gpu.nvlink.errors", Match: []kv{{"nvidia.gpu.nvlink.error.type", "crc_flit"}}, Kind: kindRename, Target: "gpu_nvlink_errors_crc", Note: "flit and data CRC errors summed"},
	{Source: "nvidia.gpu.nvlink.errors", Match: []kv{{"nvidia.gpu.nvlink.error.type", "crc_data"}}, Kind: kindRename, Target: "gpu_nvlink_errors_crc", Note: "flit and data CRC errors summed"},
	{Source: "nvidia.gpu.nvlink.errors", Match: []kv{{"nvidia.gpu.nvlink.error.type", "ecc_data"}}, Kind: kindKeep, Note: "Graphsignal has no NVLink ECC counter"},
	{Source: "nvidia.gpu.xid.errors", Kind: kindRename, Target: counterXID, Drop: []string{names.AttrXID}, Note: "all codes summed per device; each XID is also an ERROR log `XID error <code>`"},
	{Source: "nvidia.gpu.row_remap.rows", Kind: kindKeep, Note: "Graphsignal has no row remapping metrics"},
	{Source: "nvidia.gpu.row_remap.status", Kind: kindKeep, Note: "Graphsignal has no row remapping metrics"},
	{Source: "nvidia.gpu.process.memory.usage", Kind: kindKeep, Note: "Graphsignal has no per-process GPU memory"},
	{Source: "nvidia.gpu.process.utilization", Kind: kindKeep, Note: "Graphsignal has no per-process GPU utilization"},

	// cupti receiver (receiver/cuptireceiver/metadata.yaml).
	{Source: names.MetricKernelDuration, Kind: kindProfile, Target: ProfileKernels, Frame: names.AttrKernelName, Drop: []string{names.AttrKernelCategory}, Note: "frame = kernel; seconds → ns; categories are Graphsignal's to assign"},
	{Source: names.MetricKernelCount, Kind: kindSamples, Target: ProfileKernels, Frame: names.AttrKernelName, Drop: []string{names.AttrKernelCategory}, Note: "the frames' samples (launches)"},
	{Source: names.MetricMemcpyDuration, Kind: kindProfile, Target: profileMemcpy, Frame: names.AttrMemcpyKind, ValueRename: cuptiMemcpyOther, Note: "frame = copy kind (`unknown` → `other`)"},
	{Source: names.MetricMemcpyBytes, Kind: kindRename, Target: "cuda_memcpy_bytes", Tag: kv{names.AttrMemcpyKind, "kind"}, ValueRename: cuptiMemcpyOther, Note: "tag `kind`"},
	{Source: names.MetricMemsetDuration, Kind: kindProfile, Target: profileMemset, Frame: names.AttrMemoryKind, Note: "frame = memory kind"},
	{Source: names.MetricMemsetBytes, Kind: kindRename, Target: "cuda_memset_bytes", Tag: kv{names.AttrMemoryKind, "kind"}, Note: "tag `kind`"},
	{Source: names.MetricSyncDuration, Kind: kindProfile, Target: profileSync, Frame: names.AttrSyncKind, Note: "frame = sync type"},
	{Source: names.MetricGraphDuration, Kind: kindProfile, Target: profileGraphs, Frame: names.AttrCUDAGraphSignature, FrameDefault: frameUnknownGraph, ModeGauge: true, Note: "frame = graph signature, Graphsignal's 16 hex digits; `unknown` stays `unknown` (Graphsignal's `graph_<id>` is process-local)"},
	{Source: names.MetricGraphCount, Kind: kindSamples, Target: profileGraphs, Frame: names.AttrCUDAGraphSignature, FrameDefault: frameUnknownGraph, ModeGauge: true, Note: "the frames' samples (launches)"},
	{Source: names.MetricGPUBusyTime, Kind: kindKeep, Note: "Graphsignal has no device busy time"},
}

// sourceTable keeps inferprof's names but still uploads the kernel table as
// Graphsignal's kernel profile, as the exporter always has.
var sourceTable = []rule{
	{Source: names.MetricKernelDuration, Kind: kindProfile, Target: ProfileKernels, Frame: names.AttrKernelName},
	{Source: names.MetricKernelCount, Kind: kindSamples, Target: ProfileKernels, Frame: names.AttrKernelName},
}

func index(table []rule) map[string][]*rule {
	m := map[string][]*rule{}
	for i := range table {
		r := &table[i]
		m[r.Source] = append(m[r.Source], r)
	}
	return m
}

var (
	graphsignalRules = index(graphsignalTable)
	sourceRules      = index(sourceTable)
)

// prometheusScope is the scope the prometheus receiver gives what it
// scrapes: internal/transaction.go sets internal/metadata's ScopeName
// (receiver/prometheusreceiver v0.161.0, the version builder-config.yaml
// pins).
const prometheusScope = "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver"

// promName is the name Graphsignal's Prometheus import gives a family:
// prometheus_client's parser names a counter family without its _total
// suffix (recorders/prometheus_recorder.py @ c8f4018 keys on family.name);
// the prometheus receiver keeps the sample name, _total included.
func promName(name string, counter bool) string {
	if counter {
		return strings.TrimSuffix(name, "_total")
	}
	return name
}

// promStripped are the labels Graphsignal's Prometheus import drops
// (_STRIP_LABELS); le and quantile never reach OTLP attributes.
var promStripped = map[string]bool{"pid": true}

// isGPUUUID reports whether an hw.id is an NVML UUID rather than a CUDA
// ordinal (the cupti receiver's, until it learns the UUID).
func isGPUUUID(id string) bool {
	return strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-")
}

// Device resource attributes the nvml receiver sets, and their names on
// Graphsignal's device resource (nvml_recorder.py: device.name,
// architecture, compute_capability, mem_total). In graphsignal mode they
// describe the device resource and are not repeated as metric tags.
var deviceAttrNames = map[string]string{
	"hw.name":                       "device.name",
	"nvidia.gpu.architecture":       "architecture",
	"nvidia.gpu.compute_capability": "compute_capability",
}

const (
	tagDeviceUUID  = "device.uuid"
	tagDeviceBusID = "device.bus_id"
	attrPCIBusID   = "nvidia.gpu.pci.bus_id"
	tagRootPID     = "process.root_pid"
	// attrGraphMode is the cupti receiver's resource attribute for the
	// library's graph trace mode: node or graph.
	attrGraphMode = "inferprof.cupti.graph_mode"
	attrParentPID = "process.parent_pid"
)

// graphsignalTagKey maps a resource or datapoint attribute to the tag key
// Graphsignal's profiler uses; ok is false for attributes that are not
// tags in graphsignal mode (the device's description, which goes on the
// device resource).
func graphsignalTagKey(k, v string, fromResource bool) (string, bool) {
	switch {
	case k == names.AttrDeviceID:
		if isGPUUUID(v) {
			return tagDeviceUUID, true
		}
		return k, true
	case k == attrPCIBusID:
		return tagDeviceBusID, true
	case k == attrGraphMode:
		// Sent as the cuda_graph_trace_mode gauge instead.
		return "", false
	case fromResource && (strings.HasPrefix(k, "hw.") || strings.HasPrefix(k, "nvidia.gpu.")):
		return "", false
	}
	return k, true
}

// rename turns attribute keys into Graphsignal's tag keys and drops the
// device's description, which Graphsignal keeps on the device resource.
// A renamed key replaces one already set.
func (t *tagSet) rename(fromResource bool) {
	out := t.kvs[:0:0]
	for _, p := range t.kvs {
		k, ok := graphsignalTagKey(p.k, p.v, fromResource)
		if !ok {
			continue
		}
		if i := slices.IndexFunc(out, func(q kv) bool { return q.k == k }); i >= 0 {
			out[i].v = p.v
			continue
		}
		out = append(out, kv{k, p.v})
	}
	t.kvs = append(t.kvs[:0], out...)
}
