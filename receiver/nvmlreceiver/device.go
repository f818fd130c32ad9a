// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// device is one selected GPU and what the receiver remembers about it between scrapes.
type device struct {
	handle      nvml.Device
	index       int
	uuid        string
	name        string
	busID       string
	arch        string
	cc          string
	mig         string
	res         pcommon.Resource
	unsupported uint64 // bit per field: NVML said ERROR_NOT_SUPPORTED once, never ask again
	failures    [fieldCount]uint32
	fv          []nvml.FieldValue // reused GetFieldValues buffer

	// PCIe bytes integrated from throughput samples where the byte counters are unsupported.
	pcieBytes    [2]float64
	lastPCIeTime time.Time

	lastProcSample uint64                      // newest process-utilisation timestamp seen (µs)
	procRes        map[uint32]pcommon.Resource // pid → its resource (device + pid + container.id), pruned each scrape
	xid            map[uint64]int64            // XID code → count since start; never reset
}

func (d *device) supports(f field) bool { return d.unsupported&(1<<f) == 0 }

// field names one NVML query on a device, for the unsupported mask and rate-limited warnings.
type field uint8

const (
	fieldUtilization field = iota
	fieldEncoder
	fieldDecoder
	fieldMemory
	fieldPower
	fieldEnergy
	fieldTemperature
	fieldECCCorrected
	fieldECCUncorrected
	fieldPCIeReplay
	fieldClockSM
	fieldClockMemory
	fieldThrottle
	fieldPState
	fieldFan
	fieldRemap
	fieldFieldValues
	fieldPCIeTx
	fieldPCIeRx
	fieldPCIeThroughputTx
	fieldPCIeThroughputRx
	fieldNVLinkTx
	fieldNVLinkRx
	fieldNVLinkReplay
	fieldNVLinkRecovery
	fieldNVLinkCRCFlit
	fieldNVLinkCRCData
	fieldNVLinkECCData
	fieldProcesses
	fieldProcessUtilization
	fieldEvents
	fieldCount
)

var fieldNames = [fieldCount]string{
	"utilization", "encoder utilization", "decoder utilization", "memory info", "power usage",
	"total energy consumption", "temperature", "corrected ECC errors", "uncorrected ECC errors",
	"PCIe replay counter", "SM clock", "memory clock", "clocks throttle reasons", "performance state",
	"fan speed", "remapped rows", "field values", "PCIe TX bytes", "PCIe RX bytes", "PCIe TX throughput",
	"PCIe RX throughput", "NVLink TX bytes", "NVLink RX bytes", "NVLink replay errors",
	"NVLink recovery errors", "NVLink CRC flit errors", "NVLink CRC data errors", "NVLink ECC data errors",
	"compute processes", "process utilization", "event registration",
}
