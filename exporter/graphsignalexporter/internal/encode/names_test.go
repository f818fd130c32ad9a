// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.yaml.in/yaml/v3"
)

// receiverMetadata is the part of a receiver's metadata.yaml that says
// what it emits.
type receiverMetadata struct {
	Attributes map[string]struct {
		NameOverride string   `yaml:"name_override"`
		Enum         []string `yaml:"enum"`
	} `yaml:"attributes"`
	Metrics map[string]struct {
		Attributes []string `yaml:"attributes"`
	} `yaml:"metrics"`
}

func loadMetadata(t *testing.T, receiver string) receiverMetadata {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "receiver", receiver, "metadata.yaml"))
	require.NoError(t, err)
	var md receiverMetadata
	require.NoError(t, yaml.Unmarshal(b, &md))
	require.NotEmpty(t, md.Metrics)
	return md
}

// combos returns one attribute map per combination of the metric's enum
// attribute values, as the receiver can emit them.
func combos(md receiverMetadata, attrs []string) []pcommon.Map {
	out := []pcommon.Map{pcommon.NewMap()}
	for _, id := range attrs {
		a := md.Attributes[id]
		if len(a.Enum) == 0 {
			continue
		}
		key := a.NameOverride
		if key == "" {
			key = id
		}
		var next []pcommon.Map
		for _, m := range out {
			for _, v := range a.Enum {
				n := pcommon.NewMap()
				m.CopyTo(n)
				n.PutStr(key, v)
				next = append(next, n)
			}
		}
		out = next
	}
	return out
}

// Every metric the nvml and cupti receivers emit, in every attribute
// combination, has a row in the name map: Graphsignal's name, or an
// explicit "no equivalent".
func TestNameMapCoversReceivers(t *testing.T) {
	for _, receiver := range []string{"nvmlreceiver", "cuptireceiver"} {
		md := loadMetadata(t, receiver)
		for name, m := range md.Metrics {
			rules, ok := graphsignalRules[name]
			if !assert.Truef(t, ok, "%s: %s has no row in the name map", receiver, name) {
				continue
			}
			for _, attrs := range combos(md, m.Attributes) {
				assert.NotNilf(t, match(rules, attrs), "%s: %s %v has no row", receiver, name, attrs.AsRaw())
			}
		}
	}
}

// graphsignalGenC are the names Graphsignal's gen C profiler uploads
// (../shared/reference/graphsignal.md §4.1 table and §4.3 "Gen C names";
// recorders/nvml_recorder.py @ b76d851, src/cupti/cupti_activity.cpp @
// 40f84e6). The map may only use these: a name of our own in Graphsignal's
// namespace would be invented.
var graphsignalGenC = []string{
	"gpu_utilization_percent", "gpu_memory_utilization_percent",
	"gpu_memory_used_bytes", "gpu_memory_free_bytes", "gpu_memory_total_bytes", "gpu_memory_reserved_bytes",
	"gpu_temperature_celsius", "gpu_power_usage_watts", "gpu_power_management_limit_watts", "gpu_fan_speed_percent",
	"gpu_clock_sm_megahertz", "gpu_clock_mem_megahertz", "gpu_max_clock_sm_megahertz",
	"gpu_clocks_throttle_reasons", "gpu_performance_state",
	"gpu_pcie_throughput_tx_kilobytes_per_second", "gpu_pcie_throughput_rx_kilobytes_per_second",
	"gpu_pcie_link_generation", "gpu_pcie_link_width", "gpu_nvlink_link_count", "gpu_nvlink_active_links",
	"gpu_pcie_replay_counter",
	"gpu_nvlink_throughput_data_tx_kibibytes", "gpu_nvlink_throughput_data_rx_kibibytes",
	"gpu_nvlink_throughput_raw_tx_kibibytes", "gpu_nvlink_throughput_raw_rx_kibibytes",
	"gpu_nvlink_errors_replay", "gpu_nvlink_errors_recovery", "gpu_nvlink_errors_crc",
	"gpu_nvlink_errors_minor", "gpu_nvlink_errors_major", "gpu_nvlink_errors_fatal",
	"gpu_ecc_errors_corrected_volatile", "gpu_ecc_errors_uncorrected_volatile",
	"gpu_ecc_errors_corrected_aggregate", "gpu_ecc_errors_uncorrected_aggregate",
	"gpu_xid_critical_errors",
	"cuda_kernels_nanoseconds", "cuda_graphs_nanoseconds", "cuda_memcpy_nanoseconds", "cuda_memset_nanoseconds",
	"cuda_sync_nanoseconds", "cuda_memcpy_bytes", "cuda_memset_bytes", "cuda_graph_trace_mode",
}

func TestNameMapUsesOnlyGraphsignalNames(t *testing.T) {
	for _, r := range graphsignalTable {
		if r.Kind == kindKeep {
			assert.Emptyf(t, r.Target, "%s: a kept metric has no target", r.Source)
			assert.NotEmptyf(t, r.Note, "%s: say why it has no Graphsignal name", r.Source)
			continue
		}
		assert.Containsf(t, graphsignalGenC, r.Target, "%s → %s is not a Graphsignal name", r.Source, r.Target)
	}
	assert.Contains(t, graphsignalGenC, gaugeGraphMode)
	assert.Contains(t, graphsignalGenC, counterXID)
}

// The throttle bits are NVML's, as go-nvml spells them.
func TestThrottleBitsAreNVMLs(t *testing.T) {
	want := map[string]uint64{
		"gpu_idle":                    nvml.ClocksThrottleReasonGpuIdle,
		"applications_clocks_setting": nvml.ClocksThrottleReasonApplicationsClocksSetting,
		"sw_power_cap":                nvml.ClocksThrottleReasonSwPowerCap,
		"hw_slowdown":                 nvml.ClocksThrottleReasonHwSlowdown,
		"sync_boost":                  nvml.ClocksThrottleReasonSyncBoost,
		"sw_thermal_slowdown":         nvml.ClocksThrottleReasonSwThermalSlowdown,
		"hw_thermal_slowdown":         nvml.ClocksThrottleReasonHwThermalSlowdown,
		"hw_power_brake_slowdown":     nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
		"display_clock_setting":       nvml.ClocksThrottleReasonDisplayClockSetting,
	}
	assert.Equal(t, want, nvmlThrottleBits)
	// And they are exactly the reasons the receiver emits.
	md := loadMetadata(t, "nvmlreceiver")
	reasons := slices.Clone(md.Attributes["throttle_reason"].Enum)
	slices.Sort(reasons)
	var ours []string
	for k := range nvmlThrottleBits {
		ours = append(ours, k)
	}
	slices.Sort(ours)
	assert.Equal(t, reasons, ours)
}
