// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

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
