// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

// The source's state and the small methods every scrape step calls stand here, below the
// files that drive and record, so that their references all run down to this one; what is
// known about one GPU is in device.go, below it.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

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

// pendingEvent is one device event held for the next logs scrape.
type pendingEvent struct {
	dev       *device
	ts        pcommon.Timestamp
	eventType uint64
	data      uint64
}

// warnLimit is how many failures of one query on one device are logged before the rest are suppressed.
const warnLimit = 3

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
