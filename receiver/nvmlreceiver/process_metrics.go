// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// maxProcesses bounds the processes tracked per device and scrape (and so
// the pid-keyed resource cache); NVML lists a few dozen at most in practice.
const maxProcesses = 4096

// recordProcesses emits per-process memory and utilisation under a resource that adds process.pid
// and container.id to the device's attributes, so k8sattributes can associate the pod.
func (s *nvmlSource) recordProcesses(ctx context.Context, d *device, ts pcommon.Timestamp) {
	mc := &s.cfg.MetricsBuilderConfig.Metrics
	if !mc.NvidiaGpuProcessMemoryUsage.Enabled && !mc.NvidiaGpuProcessUtilization.Enabled {
		return
	}
	type proc struct {
		mem                   int64
		hasMem, hasUtil       bool
		sm, memUtil, enc, dec uint32
	}
	procs := map[uint32]*proc{}
	var dropped int64
	get := func(pid uint32) *proc {
		p := procs[pid]
		if p == nil {
			if len(procs) >= maxProcesses {
				dropped++
				return &proc{} // recorded nowhere
			}
			p = &proc{}
			procs[pid] = p
		}
		return p
	}
	defer func() {
		if dropped > 0 {
			s.tb.ReceiverNvmlProcessesDropped.Add(ctx, dropped)
		}
	}()
	if d.supports(fieldProcesses) {
		if infos, ret := d.handle.GetComputeRunningProcesses(); s.ok(ctx, d, fieldProcesses, ret) {
			for _, pi := range infos {
				p := get(pi.Pid)
				// NVML reports "not available" as all ones (e.g. under Windows WDDM or without permission).
				if pi.UsedGpuMemory != math.MaxUint64 {
					p.mem, p.hasMem = int64(pi.UsedGpuMemory), true
				}
			}
		}
	}
	if mc.NvidiaGpuProcessUtilization.Enabled && d.supports(fieldProcessUtilization) {
		samples, ret := d.handle.GetProcessUtilization(d.lastProcSample)
		if ret == nvml.ERROR_NOT_FOUND { // no sample since the last scrape
			ret = nvml.SUCCESS
		}
		if s.ok(ctx, d, fieldProcessUtilization, ret) {
			newest := d.lastProcSample
			for _, smp := range samples {
				p := get(smp.Pid)
				p.hasUtil = true
				p.sm, p.memUtil, p.enc, p.dec = smp.SmUtil, smp.MemUtil, smp.EncUtil, smp.DecUtil
				newest = max(newest, smp.TimeStamp)
			}
			d.lastProcSample = newest
		}
	}
	for pid := range d.procRes {
		if procs[pid] == nil {
			delete(d.procRes, pid)
		}
	}
	for pid, p := range procs {
		if p.hasMem {
			s.mb.RecordNvidiaGpuProcessMemoryUsageDataPoint(ts, p.mem)
		}
		if p.hasUtil {
			s.mb.RecordNvidiaGpuProcessUtilizationDataPoint(ts, float64(p.sm)/100, metadata.AttributeProcessEngineSm)
			s.mb.RecordNvidiaGpuProcessUtilizationDataPoint(ts, float64(p.memUtil)/100, metadata.AttributeProcessEngineMemory)
			s.mb.RecordNvidiaGpuProcessUtilizationDataPoint(ts, float64(p.enc)/100, metadata.AttributeProcessEngineEncoder)
			s.mb.RecordNvidiaGpuProcessUtilizationDataPoint(ts, float64(p.dec)/100, metadata.AttributeProcessEngineDecoder)
		}
		res, known := d.procRes[pid]
		if !known {
			// Built once per process: its cgroup (and so container.id) does not change while it runs.
			res = s.processResource(ctx, d, pid)
			d.procRes[pid] = res
		}
		s.mb.EmitForResource(metadata.WithResource(res))
	}
}

func (s *nvmlSource) processResource(ctx context.Context, d *device, pid uint32) pcommon.Resource {
	var cid string
	if s.procRoot != "" {
		var err error
		if cid, err = readContainerID(s.procRoot, pid); err != nil {
			s.tb.ReceiverNvmlCgroupParseErrors.Add(ctx, 1)
			s.logger.Debug("cannot read container id", zap.Uint32("pid", pid), zap.Error(err))
		}
	}
	s.fillResource(d)
	s.rb.SetProcessPid(int64(pid))
	if cid != "" {
		s.rb.SetContainerID(cid)
	}
	return s.rb.Emit()
}
