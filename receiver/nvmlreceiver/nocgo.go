// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
)

// noopSource stands in for NVML in builds without cgo, which go-nvml needs.
type noopSource struct{ logger *zap.Logger }

func newDefaultSource(_ *Config, set receiver.Settings) (gpuSource, error) {
	return &noopSource{logger: set.Logger}, nil
}

func (n *noopSource) start(context.Context, component.Host) error {
	n.logger.Warn("this binary was built without cgo, so it cannot load NVML; the nvml receiver stays idle")
	return nil
}
func (*noopSource) shutdown(context.Context) error { return nil }
func (*noopSource) scrapeMetrics(context.Context) (pmetric.Metrics, error) {
	return pmetric.NewMetrics(), nil
}
func (*noopSource) scrapeLogs(context.Context) (plog.Logs, error) { return plog.NewLogs(), nil }
func (*noopSource) wantLogs()                                     {}
