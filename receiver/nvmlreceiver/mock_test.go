// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"encoding/binary"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// gpuValues are what one mocked GPU reports; device i gets values offset by i so devices differ.
type gpuValues struct {
	utilGPU, utilMem, enc, dec uint32
	memUsed                    uint64
	powerMW                    uint32
	energyMJ                   uint64
	tempC                      uint32
	eccCorr, eccUnc            uint64
	pcieReplay                 int
	smMHz, memMHz              uint32
	throttle                   uint64
	pstate                     nvml.Pstates
	corrRows, uncRows          int
	remapPending               bool
	pcieTx, pcieRx             uint64 // bytes
	nvlinkTxKiB, nvlinkRxKiB   uint64
	nvlinkReplay               uint64
	procs                      []nvml.ProcessInfo
	procUtil                   []nvml.ProcessUtilizationSample
}

func valuesFor(i int) gpuValues {
	return gpuValues{
		utilGPU: 42 + uint32(i), utilMem: 17, enc: 3, dec: 4,
		memUsed: (10 + uint64(i)) << 30,
		powerMW: 350500, energyMJ: 123_456_789, tempC: 61,
		eccCorr: 5, eccUnc: 1, pcieReplay: 2,
		smMHz: 1980, memMHz: 2619,
		throttle: nvml.ClocksThrottleReasonSwPowerCap,
		pstate:   nvml.PSTATE_0,
		corrRows: 3, uncRows: 0, remapPending: true,
		pcieTx: 1000, pcieRx: 2000,
		nvlinkTxKiB: 10, nvlinkRxKiB: 20, nvlinkReplay: 7,
		procs: []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 8 << 30}, {Pid: 999999, UsedGpuMemory: 1 << 30}},
		procUtil: []nvml.ProcessUtilizationSample{
			{Pid: 4242, TimeStamp: 1000, SmUtil: 80, MemUtil: 30, EncUtil: 0, DecUtil: 0},
		},
	}
}

// eventQueue backs a mock NVML event set: Wait(0) returns queued events, then ERROR_TIMEOUT.
type eventQueue struct {
	mu     sync.Mutex
	events []nvml.EventData
}

func (q *eventQueue) push(ev ...nvml.EventData) {
	q.mu.Lock()
	q.events = append(q.events, ev...)
	q.mu.Unlock()
}

func (q *eventQueue) eventSet() *mock.EventSet {
	return &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			q.mu.Lock()
			defer q.mu.Unlock()
			if len(q.events) == 0 {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			ev := q.events[0]
			q.events = q.events[1:]
			return ev, nvml.SUCCESS
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
}

// newMockServer returns an H200 server with n GPUs whose every method the receiver calls is set
// (go-nvml mocks panic on an unset one).
func newMockServer(n int) (*server.Server, *eventQueue) {
	srv := dgxh200.New()
	srv.Devices = srv.Devices[:n]
	q := &eventQueue{}
	set := q.eventSet()
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	for i, h := range srv.Devices {
		setDeviceFuncs(h.(*server.Device), i, valuesFor(i))
	}
	return srv, q
}

func setDeviceFuncs(d *server.Device, i int, v gpuValues) {
	d.MemoryInfo = nvml.Memory{Total: d.MemoryInfo.Total, Used: v.memUsed, Free: d.MemoryInfo.Total - v.memUsed}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for j, c := range []byte(d.PciBusID) {
			p.BusId[j] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: v.utilGPU, Memory: v.utilMem}, nvml.SUCCESS
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return v.enc, 167000, nvml.SUCCESS }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return v.dec, 167000, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return v.powerMW, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return v.energyMJ, nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return v.tempC, nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return v.eccCorr, nvml.SUCCESS
		}
		return v.eccUnc, nvml.SUCCESS
	}
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return v.pcieReplay, nvml.SUCCESS }
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_SM {
			return v.smMHz, nvml.SUCCESS
		}
		return v.memMHz, nvml.SUCCESS
	}
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return v.throttle, nvml.SUCCESS }
	d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return v.pstate, nvml.SUCCESS }
	// H200 SXM boards have no fan.
	d.GetFanSpeedFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return v.corrRows, v.uncRows, v.remapPending, false, nvml.SUCCESS
	}
	d.GetFieldValuesFunc = func(fvs []nvml.FieldValue) nvml.Return {
		for k := range fvs {
			fv := &fvs[k]
			var val uint64
			switch fv.FieldId {
			case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
				val = v.pcieTx
			case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
				val = v.pcieRx
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
				val = v.nvlinkTxKiB
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
				val = v.nvlinkRxKiB
			case nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL:
				val = v.nvlinkReplay
			case nvml.FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL:
				fv.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			fv.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			binary.NativeEndian.PutUint64(fv.Value[:], val)
			fv.NvmlReturn = uint32(nvml.SUCCESS)
		}
		return nvml.SUCCESS
	}
	d.GetPcieThroughputFunc = func(nvml.PcieUtilCounter) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return v.procs, nvml.SUCCESS }
	d.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		var out []nvml.ProcessUtilizationSample
		for _, s := range v.procUtil {
			if s.TimeStamp > since {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return out, nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	_ = i
}
