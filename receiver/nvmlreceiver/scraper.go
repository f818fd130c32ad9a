// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// warnLimit is how many failures of one query on one device are logged before the rest are suppressed.
const warnLimit = 3

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

func newDefaultSource(cfg *Config, set receiver.Settings) (gpuSource, error) {
	return newNVMLSource(cfg, set, nvml.New())
}
