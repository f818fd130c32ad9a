// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Defaults of the series limits (issue #30). At 1000 series a full
// Prometheus scrape of the connector's metrics is about 170k samples (the
// README has the measurement); 5000, the earlier default, made 830k samples
// and a 283 MB scrape. Per model and per service, so that one sender's burst
// of invented values fills its own share; idle series expire after 5
// minutes, so a burst does not hold its share for good.
const (
	defaultCardinalityLimit    = 1000
	defaultMaxSeriesPerModel   = 200
	defaultMaxSeriesPerService = 250
	defaultMetricsExpiration   = 5 * time.Minute
)

// overflowEvery is how often a continuing overflow is logged again.
const overflowEvery = time.Minute

// overflowLog says at warn that spans went into the overflow series: the
// first time at once, then at most once per overflowEvery with the count
// since, so that a lasting overflow is visible in the log without a line per
// batch. The counter otelcol_connector_inference_metrics_overflow_spans
// counts every span.
type overflowLog struct {
	logger *zap.Logger
	cfg    *Config

	mu     sync.Mutex
	last   time.Time // zero: never logged
	since  int64     // spans not yet logged
	logged bool
}

func newOverflowLog(logger *zap.Logger, cfg *Config) *overflowLog {
	return &overflowLog{logger: logger, cfg: cfg}
}

func (o *overflowLog) note(now time.Time, spans int64) {
	o.mu.Lock()
	o.since += spans
	if o.logged && now.Sub(o.last) < overflowEvery {
		o.mu.Unlock()
		return
	}
	n := o.since
	o.since, o.last, o.logged = 0, now, true
	o.mu.Unlock()
	o.logger.Warn("inference_metrics: series limit reached; new series go into the otel.metric.overflow=true series until idle ones expire",
		zap.Int64("overflow_spans", n),
		zap.Int("aggregation_cardinality_limit", o.cfg.AggregationCardinalityLimit),
		zap.Int("max_series_per_model", o.cfg.MaxSeriesPerModel),
		zap.Int("max_series_per_service", o.cfg.MaxSeriesPerService),
		zap.Duration("metrics_expiration", o.cfg.MetricsExpiration))
}
