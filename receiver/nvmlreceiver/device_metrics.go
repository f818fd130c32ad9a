// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// fieldValueQueries are read with one GetFieldValues call per device and scrape.
var fieldValueQueries = []struct {
	f     field
	id    uint32
	scope uint32
}{
	{fieldPCIeTx, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0},
	{fieldPCIeRx, nvml.FI_DEV_PCIE_COUNT_RX_BYTES, 0},
	// scopeId UINT_MAX asks NVML for the sum over all links; the value is in KiB.
	{fieldNVLinkTx, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, math.MaxUint32},
	{fieldNVLinkRx, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, math.MaxUint32},
	{fieldNVLinkReplay, nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, 0},
	{fieldNVLinkRecovery, nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 0},
	{fieldNVLinkCRCFlit, nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 0},
	{fieldNVLinkCRCData, nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, 0},
	{fieldNVLinkECCData, nvml.FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL, 0},
}

var throttleReasons = []struct {
	mask uint64
	attr metadata.AttributeThrottleReason
}{
	{nvml.ClocksThrottleReasonGpuIdle, metadata.AttributeThrottleReasonGpuIdle},
	{nvml.ClocksThrottleReasonApplicationsClocksSetting, metadata.AttributeThrottleReasonApplicationsClocksSetting},
	{nvml.ClocksThrottleReasonSwPowerCap, metadata.AttributeThrottleReasonSwPowerCap},
	{nvml.ClocksThrottleReasonHwSlowdown, metadata.AttributeThrottleReasonHwSlowdown},
	{nvml.ClocksThrottleReasonSyncBoost, metadata.AttributeThrottleReasonSyncBoost},
	{nvml.ClocksThrottleReasonSwThermalSlowdown, metadata.AttributeThrottleReasonSwThermalSlowdown},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, metadata.AttributeThrottleReasonHwThermalSlowdown},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, metadata.AttributeThrottleReasonHwPowerBrakeSlowdown},
	{nvml.ClocksThrottleReasonDisplayClockSetting, metadata.AttributeThrottleReasonDisplayClockSetting},
}

func (s *nvmlSource) recordDevice(ctx context.Context, d *device, now time.Time, ts pcommon.Timestamp) {
	m := &s.cfg.MetricsBuilderConfig.Metrics
	h := d.handle
	if m.HwGpuUtilization.Enabled || m.NvidiaGpuMemoryActivity.Enabled {
		if d.supports(fieldUtilization) {
			if u, ret := h.GetUtilizationRates(); s.ok(ctx, d, fieldUtilization, ret) {
				s.mb.RecordHwGpuUtilizationDataPoint(ts, float64(u.Gpu)/100, metadata.AttributeGpuTaskGeneral)
				s.mb.RecordNvidiaGpuMemoryActivityDataPoint(ts, float64(u.Memory)/100)
			}
		}
	}
	if m.HwGpuUtilization.Enabled {
		if d.supports(fieldEncoder) {
			if u, _, ret := h.GetEncoderUtilization(); s.ok(ctx, d, fieldEncoder, ret) {
				s.mb.RecordHwGpuUtilizationDataPoint(ts, float64(u)/100, metadata.AttributeGpuTaskEncoder)
			}
		}
		if d.supports(fieldDecoder) {
			if u, _, ret := h.GetDecoderUtilization(); s.ok(ctx, d, fieldDecoder, ret) {
				s.mb.RecordHwGpuUtilizationDataPoint(ts, float64(u)/100, metadata.AttributeGpuTaskDecoder)
			}
		}
	}
	if d.supports(fieldMemory) {
		if mem, ret := h.GetMemoryInfo(); s.ok(ctx, d, fieldMemory, ret) {
			s.mb.RecordHwGpuMemoryUsageDataPoint(ts, int64(mem.Used))
			s.mb.RecordHwGpuMemoryLimitDataPoint(ts, int64(mem.Total))
			if mem.Total > 0 {
				s.mb.RecordHwGpuMemoryUtilizationDataPoint(ts, float64(mem.Used)/float64(mem.Total))
			}
		}
	}
	if m.HwPower.Enabled && d.supports(fieldPower) {
		if mw, ret := h.GetPowerUsage(); s.ok(ctx, d, fieldPower, ret) {
			s.mb.RecordHwPowerDataPoint(ts, float64(mw)/1000)
		}
	}
	if m.HwEnergy.Enabled && d.supports(fieldEnergy) {
		if mj, ret := h.GetTotalEnergyConsumption(); s.ok(ctx, d, fieldEnergy, ret) {
			s.mb.RecordHwEnergyDataPoint(ts, float64(mj)/1000)
		}
	}
	if m.HwTemperature.Enabled && d.supports(fieldTemperature) {
		if c, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); s.ok(ctx, d, fieldTemperature, ret) {
			s.mb.RecordHwTemperatureDataPoint(ts, float64(c))
		}
	}
	if m.HwErrors.Enabled {
		if d.supports(fieldECCCorrected) {
			if n, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); s.ok(ctx, d, fieldECCCorrected, ret) {
				s.mb.RecordHwErrorsDataPoint(ts, int64(n), metadata.AttributeErrorTypeCorrected)
			}
		}
		if d.supports(fieldECCUncorrected) {
			if n, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); s.ok(ctx, d, fieldECCUncorrected, ret) {
				s.mb.RecordHwErrorsDataPoint(ts, int64(n), metadata.AttributeErrorTypeUncorrected)
			}
		}
		if d.supports(fieldPCIeReplay) {
			if n, ret := h.GetPcieReplayCounter(); s.ok(ctx, d, fieldPCIeReplay, ret) {
				s.mb.RecordHwErrorsDataPoint(ts, int64(n), metadata.AttributeErrorTypePcieReplay)
			}
		}
	}
	if m.NvidiaGpuClockFrequency.Enabled {
		if d.supports(fieldClockSM) {
			if mhz, ret := h.GetClockInfo(nvml.CLOCK_SM); s.ok(ctx, d, fieldClockSM, ret) {
				s.mb.RecordNvidiaGpuClockFrequencyDataPoint(ts, int64(mhz)*1_000_000, metadata.AttributeClockSm)
			}
		}
		if d.supports(fieldClockMemory) {
			if mhz, ret := h.GetClockInfo(nvml.CLOCK_MEM); s.ok(ctx, d, fieldClockMemory, ret) {
				s.mb.RecordNvidiaGpuClockFrequencyDataPoint(ts, int64(mhz)*1_000_000, metadata.AttributeClockMemory)
			}
		}
	}
	if m.NvidiaGpuThrottle.Enabled && d.supports(fieldThrottle) {
		if mask, ret := h.GetCurrentClocksThrottleReasons(); s.ok(ctx, d, fieldThrottle, ret) {
			for _, r := range throttleReasons {
				var v int64
				if mask&r.mask != 0 {
					v = 1
				}
				s.mb.RecordNvidiaGpuThrottleDataPoint(ts, v, r.attr)
			}
		}
	}
	if m.NvidiaGpuPerformanceState.Enabled && d.supports(fieldPState) {
		if p, ret := h.GetPerformanceState(); s.ok(ctx, d, fieldPState, ret) && p != nvml.PSTATE_UNKNOWN {
			s.mb.RecordNvidiaGpuPerformanceStateDataPoint(ts, int64(p))
		}
	}
	if m.NvidiaGpuFanSpeed.Enabled && d.supports(fieldFan) {
		if pct, ret := h.GetFanSpeed(); s.ok(ctx, d, fieldFan, ret) {
			s.mb.RecordNvidiaGpuFanSpeedDataPoint(ts, float64(pct)/100)
		}
	}
	if (m.NvidiaGpuRowRemapRows.Enabled || m.NvidiaGpuRowRemapStatus.Enabled) && d.supports(fieldRemap) {
		if corr, unc, pending, failed, ret := h.GetRemappedRows(); s.ok(ctx, d, fieldRemap, ret) {
			s.mb.RecordNvidiaGpuRowRemapRowsDataPoint(ts, int64(corr), metadata.AttributeRemapTypeCorrectable)
			s.mb.RecordNvidiaGpuRowRemapRowsDataPoint(ts, int64(unc), metadata.AttributeRemapTypeUncorrectable)
			s.mb.RecordNvidiaGpuRowRemapStatusDataPoint(ts, boolInt(pending), metadata.AttributeRemapStatePending)
			s.mb.RecordNvidiaGpuRowRemapStatusDataPoint(ts, boolInt(failed), metadata.AttributeRemapStateFailed)
		}
	}
	if m.HwGpuIo.Enabled || m.NvidiaGpuNvlinkErrors.Enabled {
		s.recordFieldValues(ctx, d, now, ts)
	}
	if m.NvidiaGpuXidErrors.Enabled {
		for code, n := range d.xid {
			s.mb.RecordNvidiaGpuXidErrorsDataPoint(ts, n, int64(code))
		}
	}
}

// recordFieldValues reads the PCIe/NVLink byte and NVLink error counters with one NVML call.
func (s *nvmlSource) recordFieldValues(ctx context.Context, d *device, now time.Time, ts pcommon.Timestamp) {
	var pcieOK [2]bool
	if d.supports(fieldFieldValues) {
		for i, q := range fieldValueQueries {
			d.fv[i] = nvml.FieldValue{FieldId: q.id, ScopeId: q.scope}
		}
		if ret := d.handle.GetFieldValues(d.fv); s.ok(ctx, d, fieldFieldValues, ret) {
			for i, q := range fieldValueQueries {
				fv := &d.fv[i]
				if !d.supports(q.f) || !s.ok(ctx, d, q.f, nvml.Return(fv.NvmlReturn)) {
					continue
				}
				v, ok := fieldUint(fv)
				if !ok {
					continue
				}
				switch q.f {
				case fieldPCIeTx:
					pcieOK[1] = true
					s.mb.RecordHwGpuIoDataPoint(ts, int64(v), metadata.AttributeInterconnectPcie, metadata.AttributeDirectionTransmit)
				case fieldPCIeRx:
					pcieOK[0] = true
					s.mb.RecordHwGpuIoDataPoint(ts, int64(v), metadata.AttributeInterconnectPcie, metadata.AttributeDirectionReceive)
				case fieldNVLinkTx:
					s.mb.RecordHwGpuIoDataPoint(ts, int64(v)*1024, metadata.AttributeInterconnectNvlink, metadata.AttributeDirectionTransmit)
				case fieldNVLinkRx:
					s.mb.RecordHwGpuIoDataPoint(ts, int64(v)*1024, metadata.AttributeInterconnectNvlink, metadata.AttributeDirectionReceive)
				case fieldNVLinkReplay:
					s.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(ts, int64(v), metadata.AttributeNvlinkErrorReplay)
				case fieldNVLinkRecovery:
					s.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(ts, int64(v), metadata.AttributeNvlinkErrorRecovery)
				case fieldNVLinkCRCFlit:
					s.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(ts, int64(v), metadata.AttributeNvlinkErrorCrcFlit)
				case fieldNVLinkCRCData:
					s.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(ts, int64(v), metadata.AttributeNvlinkErrorCrcData)
				case fieldNVLinkECCData:
					s.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(ts, int64(v), metadata.AttributeNvlinkErrorEccData)
				}
			}
		}
	}
	// Older GPUs have no PCIe byte counters: integrate the throughput sample (KiB/s over 20 ms) over
	// the time since the last scrape into a running total.
	if !s.cfg.MetricsBuilderConfig.Metrics.HwGpuIo.Enabled || (pcieOK[0] && pcieOK[1]) {
		return
	}
	elapsed := 0.0
	if !d.lastPCIeTime.IsZero() {
		elapsed = now.Sub(d.lastPCIeTime).Seconds()
	}
	d.lastPCIeTime = now
	dirs := [2]struct {
		f   field
		c   nvml.PcieUtilCounter
		dir metadata.AttributeDirection
	}{
		{fieldPCIeThroughputRx, nvml.PCIE_UTIL_RX_BYTES, metadata.AttributeDirectionReceive},
		{fieldPCIeThroughputTx, nvml.PCIE_UTIL_TX_BYTES, metadata.AttributeDirectionTransmit},
	}
	for i, x := range dirs {
		if pcieOK[i] || !d.supports(x.f) {
			continue
		}
		if kibps, ret := d.handle.GetPcieThroughput(x.c); s.ok(ctx, d, x.f, ret) {
			d.pcieBytes[i] += float64(kibps) * 1024 * elapsed
			s.mb.RecordHwGpuIoDataPoint(ts, int64(d.pcieBytes[i]), metadata.AttributeInterconnectPcie, x.dir)
		}
	}
}

// fieldUint decodes a field value as an unsigned count.
func fieldUint(fv *nvml.FieldValue) (uint64, bool) {
	switch nvml.ValueType(fv.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG:
		return binary.NativeEndian.Uint64(fv.Value[:]), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		v := int64(binary.NativeEndian.Uint64(fv.Value[:]))
		return uint64(max(v, 0)), v >= 0
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.NativeEndian.Uint32(fv.Value[:4])), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		v := int32(binary.NativeEndian.Uint32(fv.Value[:4]))
		return uint64(max(v, 0)), v >= 0
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(binary.NativeEndian.Uint16(fv.Value[:2])), true
	case nvml.VALUE_TYPE_DOUBLE:
		v := math.Float64frombits(binary.NativeEndian.Uint64(fv.Value[:]))
		return uint64(max(v, 0)), v >= 0
	default:
		return 0, false
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
