// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"strconv"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

// fastDevice answers the per-scrape queries from fixed values without the go-nvml mock's call
// recording, which would grow without bound under b.Loop and dominate the figure. Identity
// queries (UUID, name, PCI, ...) still go to the dgxh200 mock.
type fastDevice struct {
	*server.Device
	v gpuValues
}

func (d *fastDevice) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return nvml.Utilization{Gpu: d.v.utilGPU, Memory: d.v.utilMem}, nvml.SUCCESS
}
func (d *fastDevice) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	return d.v.enc, 0, nvml.SUCCESS
}
func (d *fastDevice) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	return d.v.dec, 0, nvml.SUCCESS
}
func (d *fastDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	return nvml.Memory{Total: 141 << 30, Used: d.v.memUsed}, nvml.SUCCESS
}
func (d *fastDevice) GetPowerUsage() (uint32, nvml.Return) { return d.v.powerMW, nvml.SUCCESS }
func (d *fastDevice) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	return d.v.energyMJ, nvml.SUCCESS
}
func (d *fastDevice) GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return) {
	return d.v.tempC, nvml.SUCCESS
}
func (d *fastDevice) GetTotalEccErrors(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
	return d.v.eccCorr, nvml.SUCCESS
}
func (d *fastDevice) GetPcieReplayCounter() (int, nvml.Return) { return d.v.pcieReplay, nvml.SUCCESS }
func (d *fastDevice) GetClockInfo(nvml.ClockType) (uint32, nvml.Return) {
	return d.v.smMHz, nvml.SUCCESS
}
func (d *fastDevice) GetCurrentClocksThrottleReasons() (uint64, nvml.Return) {
	return d.v.throttle, nvml.SUCCESS
}
func (d *fastDevice) GetPerformanceState() (nvml.Pstates, nvml.Return) {
	return d.v.pstate, nvml.SUCCESS
}
func (d *fastDevice) GetFanSpeed() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
func (d *fastDevice) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	return d.v.corrRows, d.v.uncRows, false, false, nvml.SUCCESS
}
func (d *fastDevice) GetFieldValues(fvs []nvml.FieldValue) nvml.Return {
	for i := range fvs {
		fvs[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
		fvs[i].NvmlReturn = uint32(nvml.SUCCESS)
		fvs[i].Value = [8]byte{1}
	}
	return nvml.SUCCESS
}
func (d *fastDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.v.procs, nvml.SUCCESS
}
func (d *fastDevice) GetProcessUtilization(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	return d.v.procUtil, nvml.SUCCESS
}

// baselineScrape makes the same NVML queries as the receiver and keeps the values, but builds no
// pdata: the floor any NVML-based collector pays. The ratio to it is what the receiver adds.
func baselineScrape(devs []nvml.Device) uint64 {
	var sum uint64
	fvs := make([]nvml.FieldValue, len(fieldValueQueries))
	for _, d := range devs {
		u, _ := d.GetUtilizationRates()
		e, _, _ := d.GetEncoderUtilization()
		dc, _, _ := d.GetDecoderUtilization()
		m, _ := d.GetMemoryInfo()
		p, _ := d.GetPowerUsage()
		en, _ := d.GetTotalEnergyConsumption()
		t, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
		c1, _ := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		c2, _ := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		r, _ := d.GetPcieReplayCounter()
		sm, _ := d.GetClockInfo(nvml.CLOCK_SM)
		mc, _ := d.GetClockInfo(nvml.CLOCK_MEM)
		th, _ := d.GetCurrentClocksThrottleReasons()
		ps, _ := d.GetPerformanceState()
		cr, ur, _, _, _ := d.GetRemappedRows()
		_ = d.GetFieldValues(fvs)
		procs, _ := d.GetComputeRunningProcesses()
		samples, _ := d.GetProcessUtilization(0)
		sum += uint64(u.Gpu) + uint64(e) + uint64(dc) + m.Used + uint64(p) + en + uint64(t) + c1 + c2 + uint64(r) +
			uint64(sm) + uint64(mc) + th + uint64(ps) + uint64(cr) + uint64(ur) + uint64(len(procs)) + uint64(len(samples)) + uint64(fvs[0].Value[0])
	}
	return sum
}

// BenchmarkScrape measures one scrape interval: ours (metrics built and emitted) against the bare
// NVML reads, for 1 and 8 H200s. Divide by the device count for the cost per device.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1, 8} {
		srv, _ := newMockServer(n)
		for i, d := range srv.Devices {
			srv.Devices[i] = &fastDevice{Device: d.(*server.Device), v: valuesFor(i)}
		}
		b.Run("devices="+strconv.Itoa(n)+"/impl=ours", func(b *testing.B) {
			env := newTestEnv(b, srv, nil)
			require.NoError(b, env.src.start(context.Background(), componenttest.NewNopHost()))
			defer func() { require.NoError(b, env.src.shutdown(context.Background())) }()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				md, err := env.src.scrapeMetrics(ctx)
				if err != nil || md.DataPointCount() == 0 {
					b.Fatal("empty scrape", err)
				}
			}
		})
		b.Run("devices="+strconv.Itoa(n)+"/impl=baseline", func(b *testing.B) {
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				sink += baselineScrape(srv.Devices)
			}
			if sink == 0 {
				b.Fatal("no values read")
			}
		})
	}
}
