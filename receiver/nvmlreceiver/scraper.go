// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// warnLimit is how many failures of one query on one device are logged before the rest are suppressed.
const warnLimit = 3

// maxEventsPerPoll bounds one non-blocking drain of the event set, so a storm cannot stall a scrape.
const maxEventsPerPoll = 256

// maxXIDCodes bounds the per-device XID counter map (NVIDIA's catalogue has under 200 codes).
const maxXIDCodes = 256

// maxProcesses bounds the processes tracked per device and scrape (and so
// the pid-keyed resource cache); NVML lists a few dozen at most in practice.
const maxProcesses = 4096

// criticalEvents are the NVML event types registered; each is masked with what the device supports.
const criticalEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypeDramRetirementFailure | nvml.EventTypeGpuUnavailableError |
	nvml.EventTypeFatalPoisonError | nvml.EventTypeNonFatalPoisonError | nvml.EventTypeGpuRecoveryAction

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

type pendingEvent struct {
	dev       *device
	ts        pcommon.Timestamp
	eventType uint64
	data      uint64
}

// nvmlSource reads GPUs through an nvml.Interface (the real library or a go-nvml mock).
type nvmlSource struct {
	cfg      *Config
	set      receiver.Settings
	logger   *zap.Logger
	lib      nvml.Interface
	filter   []deviceSelector
	procRoot string
	now      func() time.Time // for tests

	// mu serialises the metrics and logs scrapes: both read the devices and drain the event set,
	// and NVML calls are microseconds, so one lock held for a scrape is the simple choice.
	mu          sync.Mutex
	mb          *metadata.MetricsBuilder
	rb          *metadata.ResourceBuilder
	tb          *metadata.TelemetryBuilder
	initialized bool
	warned      bool // the one "NVML unavailable" warning was logged
	lastInitTry time.Time
	devices     []*device
	eventSet    nvml.EventSet
	logs        bool
	pending     []pendingEvent
	cudaVersion string
	driver      string
}

func newNVMLSource(cfg *Config, set receiver.Settings, lib nvml.Interface) (*nvmlSource, error) {
	filter, err := parseDeviceFilter(cfg.Devices)
	if err != nil {
		return nil, fmt.Errorf("devices: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create telemetry: %w", err)
	}
	mb := metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set)
	return &nvmlSource{
		cfg: cfg, set: set, logger: set.Logger, lib: lib, filter: filter,
		procRoot: cfg.Processes.ProcRoot, now: time.Now, mb: mb, rb: mb.NewResourceBuilder(), tb: tb,
	}, nil
}

func (s *nvmlSource) wantLogs() {
	s.mu.Lock()
	s.logs = true
	s.mu.Unlock()
}

func (s *nvmlSource) start(context.Context, component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tryInit()
	return nil
}

// tryInit initialises NVML and discovers devices. Missing hardware is a state, not an error:
// it warns once, stays idle and is retried by later scrapes every init_retry_interval.
func (s *nvmlSource) tryInit() {
	s.lastInitTry = s.now()
	if ret := s.lib.Init(); ret != nvml.SUCCESS {
		if !s.warned {
			s.warned = true
			s.logger.Warn("NVML is not available; the nvml receiver stays idle and retries in the background",
				zap.String("nvml_error", ret.Error()),
				zap.Duration("retry_interval", s.cfg.InitRetryInterval),
				zap.String("hint", "an NVIDIA driver with libnvidia-ml.so.1 is needed; no GPU metrics or device events until it loads"))
		} else {
			s.logger.Debug("NVML still not available", zap.String("nvml_error", ret.Error()))
		}
		return
	}
	s.initialized = true
	s.discover()
}

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

func (s *nvmlSource) registerEvents(d *device) {
	if s.eventSet == nil {
		return
	}
	supported, ret := d.handle.GetSupportedEventTypes()
	if !s.ok(context.Background(), d, fieldEvents, ret) {
		return
	}
	mask := supported & criticalEvents
	if mask == 0 {
		return
	}
	// A failure is counted and logged by ok; the GPU's metrics are still read.
	s.ok(context.Background(), d, fieldEvents, d.handle.RegisterEvents(mask, s.eventSet))
}

// ok classifies the result of one query. ERROR_NOT_SUPPORTED marks the field unsupported on this
// device (logged once at debug, never asked again); other errors are counted and logged, the first
// warnLimit times per device and field.
func (s *nvmlSource) ok(ctx context.Context, d *device, f field, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		d.failures[f] = 0
		return true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		d.unsupported |= 1 << f
		s.logger.Debug("field not supported on this GPU; skipped from now on",
			zap.String("field", fieldNames[f]), zap.String("uuid", d.uuid), zap.String("nvml_error", ret.Error()))
		return false
	default:
		s.tb.ReceiverNvmlDeviceErrors.Add(ctx, 1)
		d.failures[f]++
		if n := d.failures[f]; n <= warnLimit {
			msg := "NVML query failed"
			if n == warnLimit {
				msg = "NVML query failed; suppressing further warnings for this field until it succeeds"
			}
			s.logger.Warn(msg, zap.String("field", fieldNames[f]), zap.String("uuid", d.uuid),
				zap.Int("index", d.index), zap.String("nvml_error", ret.Error()))
		}
		return false
	}
}

func (d *device) supports(f field) bool { return d.unsupported&(1<<f) == 0 }

func (s *nvmlSource) maybeRetryInit() {
	if s.initialized || s.now().Sub(s.lastInitTry) < s.cfg.InitRetryInterval {
		return
	}
	s.tryInit()
}

func (s *nvmlSource) scrapeMetrics(ctx context.Context) (pmetric.Metrics, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeRetryInit()
	if !s.initialized {
		return pmetric.NewMetrics(), nil
	}
	s.pollEvents(ctx)
	now := s.now()
	ts := pcommon.NewTimestampFromTime(now)
	for _, d := range s.devices {
		s.recordDevice(ctx, d, now, ts)
		s.mb.EmitForResource(metadata.WithResource(d.res))
		s.recordProcesses(ctx, d, ts)
	}
	// Failures are counted and logged (rate-limited) per device and field above, not returned:
	// scraperhelper logs a returned error at ERROR on every interval.
	return s.mb.Emit(), nil
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

// pollEvents drains the event set without blocking (timeout 0): it counts XIDs and, when a logs
// pipeline is attached, keeps a bounded list of records for the next logs scrape.
func (s *nvmlSource) pollEvents(ctx context.Context) {
	if s.eventSet == nil {
		return
	}
	for range maxEventsPerPoll {
		ev, ret := s.eventSet.Wait(0)
		if ret == nvml.ERROR_TIMEOUT {
			return
		}
		if ret != nvml.SUCCESS {
			s.tb.ReceiverNvmlDeviceErrors.Add(ctx, 1)
			s.logger.Debug("NVML event wait failed", zap.String("nvml_error", ret.Error()))
			return
		}
		d := s.deviceOf(ev.Device)
		if d == nil {
			continue
		}
		s.tb.ReceiverNvmlEvents.Add(ctx, 1)
		if ev.EventType == nvml.EventTypeXidCriticalError {
			if _, seen := d.xid[ev.EventData]; seen || len(d.xid) < maxXIDCodes {
				d.xid[ev.EventData]++
			} else {
				s.tb.ReceiverNvmlXidCodesDropped.Add(ctx, 1)
			}
		}
		if !s.logs {
			continue
		}
		if len(s.pending) >= s.cfg.Events.MaxPending {
			s.tb.ReceiverNvmlEventsDropped.Add(ctx, 1)
			continue
		}
		s.pending = append(s.pending, pendingEvent{dev: d, ts: pcommon.NewTimestampFromTime(s.now()), eventType: ev.EventType, data: ev.EventData})
	}
}

func (s *nvmlSource) deviceOf(h nvml.Device) *device {
	for _, d := range s.devices {
		if d.handle == h {
			return d
		}
	}
	return nil
}

func (s *nvmlSource) scrapeLogs(ctx context.Context) (plog.Logs, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeRetryInit()
	if !s.initialized {
		return plog.NewLogs(), nil
	}
	s.pollEvents(ctx)
	logs := plog.NewLogs()
	if len(s.pending) == 0 {
		return logs, nil
	}
	byDev := map[*device]plog.LogRecordSlice{}
	for _, ev := range s.pending {
		lrs, ok := byDev[ev.dev]
		if !ok {
			rl := logs.ResourceLogs().AppendEmpty()
			ev.dev.res.CopyTo(rl.Resource())
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(metadata.ScopeName)
			lrs = sl.LogRecords()
			byDev[ev.dev] = lrs
		}
		fillEventRecord(lrs.AppendEmpty(), ev)
	}
	s.pending = s.pending[:0]
	return logs, nil
}

func fillEventRecord(lr plog.LogRecord, ev pendingEvent) {
	lr.SetTimestamp(ev.ts)
	lr.SetObservedTimestamp(ev.ts)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	attrs := lr.Attributes()
	attrs.PutStr(names.AttrDeviceID, ev.dev.uuid)
	var body string
	switch ev.eventType {
	case nvml.EventTypeXidCriticalError:
		lr.SetEventName(names.EventNameXID)
		attrs.PutStr(names.AttrGPUEventType, "xid")
		attrs.PutInt(names.AttrXID, int64(ev.data))
		if meaning := xidMeaning(ev.data); meaning != "" {
			attrs.PutStr(names.AttrXIDMeaning, meaning)
			body = fmt.Sprintf("XID %d on GPU %d (%s): %s", ev.data, ev.dev.index, ev.dev.uuid, meaning)
		} else {
			body = fmt.Sprintf("XID %d on GPU %d (%s)", ev.data, ev.dev.index, ev.dev.uuid)
		}
	default:
		name := eventTypeName(ev.eventType)
		lr.SetEventName("nvidia.gpu." + name)
		attrs.PutStr(names.AttrGPUEventType, name)
		attrs.PutInt("nvidia.gpu.event.data", int64(ev.data))
		body = fmt.Sprintf("%s on GPU %d (%s)", strings.ReplaceAll(name, "_", " "), ev.dev.index, ev.dev.uuid)
	}
	lr.Body().SetStr(body)
}

func eventTypeName(t uint64) string {
	switch t {
	case nvml.EventTypeDoubleBitEccError:
		return "double_bit_ecc_error"
	case nvml.EventTypeDramRetirementFailure:
		return "dram_retirement_failure"
	case nvml.EventTypeGpuUnavailableError:
		return "gpu_unavailable_error"
	case nvml.EventTypeFatalPoisonError:
		return "fatal_poison_error"
	case nvml.EventTypeNonFatalPoisonError:
		return "non_fatal_poison_error"
	case nvml.EventTypeGpuRecoveryAction:
		return "gpu_recovery_action"
	default:
		return "event_" + strconv.FormatUint(t, 10)
	}
}

func (s *nvmlSource) shutdown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initialized {
		return nil
	}
	s.initialized = false
	if s.eventSet != nil {
		_ = s.eventSet.Free()
		s.eventSet = nil
	}
	s.devices = nil
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %w", ret)
	}
	return nil
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

func newDefaultSource(cfg *Config, set receiver.Settings) (gpuSource, error) {
	return newNVMLSource(cfg, set, nvml.New())
}
