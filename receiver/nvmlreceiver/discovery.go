// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
)

func (s *nvmlSource) discover() {
	s.driver, _ = s.lib.SystemGetDriverVersion()
	if v, ret := s.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		s.cudaVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.logger.Warn("NVML cannot count devices; no GPU metrics", zap.String("nvml_error", ret.Error()))
		return
	}
	handles := s.selectDevices(count)
	if s.cfg.Events.Enabled && len(handles) > 0 {
		set, ret := s.lib.EventSetCreate()
		if ret == nvml.SUCCESS {
			s.eventSet = set
		} else {
			s.logger.Warn("NVML event set not created; no XID events", zap.String("nvml_error", ret.Error()))
		}
	}
	for _, h := range handles {
		d, err := s.newDevice(h)
		if err != nil {
			s.logger.Warn("skipping GPU", zap.Error(err))
			continue
		}
		s.devices = append(s.devices, d)
		s.registerEvents(d)
	}
	s.logger.Info("nvml receiver started",
		zap.Int("gpus_found", count), zap.Int("gpus_selected", len(s.devices)),
		zap.String("driver_version", s.driver), zap.String("cuda_version", s.cudaVersion))
}

// selectDevices applies the CUDA_VISIBLE_DEVICES-style filter. Like CUDA, it keeps the listed
// order and stops at the first entry that names no device.
func (s *nvmlSource) selectDevices(count int) []nvml.Device {
	var out []nvml.Device
	if s.filter == nil {
		for i := range count {
			h, ret := s.lib.DeviceGetHandleByIndex(i)
			if ret != nvml.SUCCESS {
				s.logger.Warn("skipping GPU", zap.Int("index", i), zap.String("nvml_error", ret.Error()))
				continue
			}
			out = append(out, h)
		}
		return out
	}
	var uuids []string // resolved lazily, for prefix matches
	seen := map[int]bool{}
	for _, sel := range s.filter {
		idx := sel.index
		if sel.uuid != "" {
			if uuids == nil {
				uuids = make([]string, count)
				for i := range count {
					if h, ret := s.lib.DeviceGetHandleByIndex(i); ret == nvml.SUCCESS {
						uuids[i], _ = h.GetUUID()
					}
				}
			}
			idx = -1
			for i, u := range uuids {
				if u != "" && strings.HasPrefix(u, sel.uuid) {
					if idx >= 0 { // CUDA rejects an ambiguous prefix
						idx = -2
						break
					}
					idx = i
				}
			}
		}
		if idx < 0 || idx >= count {
			s.logger.Warn("devices: entry names no single GPU; it and the entries after it are ignored, as CUDA does",
				zap.String("devices", s.cfg.Devices), zap.Int("gpus_found", count))
			break
		}
		if seen[idx] {
			continue
		}
		seen[idx] = true
		h, ret := s.lib.DeviceGetHandleByIndex(idx)
		if ret != nvml.SUCCESS {
			s.logger.Warn("skipping GPU", zap.Int("index", idx), zap.String("nvml_error", ret.Error()))
			continue
		}
		out = append(out, h)
	}
	return out
}

func (s *nvmlSource) newDevice(h nvml.Device) (*device, error) {
	d := &device{handle: h, procRes: map[uint32]pcommon.Resource{}, xid: map[uint64]int64{}}
	var ret nvml.Return
	if d.uuid, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("read GPU UUID: %w", ret)
	}
	if d.index, ret = h.GetIndex(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("read index of %s: %w", d.uuid, ret)
	}
	d.name, _ = h.GetName()
	if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		d.busID = cString(pci.BusId[:])
	}
	if a, ret := h.GetArchitecture(); ret == nvml.SUCCESS {
		d.arch = archName(a)
	}
	if major, minor, ret := h.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		d.cc = strconv.Itoa(major) + "." + strconv.Itoa(minor)
	}
	switch cur, _, ret := h.GetMigMode(); {
	case ret != nvml.SUCCESS:
		d.mig = "unsupported"
	case cur == nvml.DEVICE_MIG_ENABLE:
		d.mig = "enabled"
		s.logger.Info("MIG is enabled; NVML reports some fields only per MIG instance, and those are skipped", zap.String("uuid", d.uuid))
	default:
		d.mig = "disabled"
	}
	d.fv = make([]nvml.FieldValue, len(fieldValueQueries))
	s.fillResource(d)
	d.res = s.rb.Emit()
	return d, nil
}

func (s *nvmlSource) fillResource(d *device) {
	s.rb.SetHwID(d.uuid)
	s.rb.SetHwName(d.name)
	s.rb.SetHwType("gpu")
	s.rb.SetHwVendor("NVIDIA")
	s.rb.SetHwDriverVersion(s.driver)
	s.rb.SetNvidiaGpuIndex(int64(d.index))
	s.rb.SetNvidiaGpuPciBusID(d.busID)
	s.rb.SetNvidiaGpuArchitecture(d.arch)
	s.rb.SetNvidiaGpuComputeCapability(d.cc)
	s.rb.SetNvidiaGpuCudaDriverVersion(s.cudaVersion)
	s.rb.SetNvidiaGpuMigMode(d.mig)
}

func archName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "volta"
	case nvml.DEVICE_ARCH_TURING:
		return "turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "ada"
	case nvml.DEVICE_ARCH_HOPPER:
		return "hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "blackwell"
	default:
		return "unknown"
	}
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
