// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// gpuSource is the state both signals read: one NVML session per receiver config, so the
// metrics and logs pipelines share devices, the event set and the XID counters.
type gpuSource interface {
	start(ctx context.Context, host component.Host) error
	shutdown(ctx context.Context) error
	scrapeMetrics(ctx context.Context) (pmetric.Metrics, error)
	scrapeLogs(ctx context.Context) (plog.Logs, error)
	// wantLogs tells the source that a logs pipeline drains event records.
	wantLogs()
}
