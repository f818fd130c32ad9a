// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.uber.org/zap"
)

// Start counts a window the last run left open (with storage), then starts
// the flush ticker and the ticker that keeps the window marker current.
func (c *metricsConnector) Start(startCtx context.Context, host component.Host) error {
	if c.cfg.Storage != nil {
		if err := c.openMarker(startCtx, host); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	ticker := c.clock.NewTicker(c.cfg.MetricsFlushInterval)
	var markerTick <-chan time.Time // nil without storage: never ready
	if c.markerClient != nil {
		mt := c.clock.NewTicker(markerEvery)
		markerTick = mt.Chan()
		context.AfterFunc(ctx, mt.Stop)
	}
	c.wg.Go(func() {
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.Chan():
				c.flush(ctx, false)
			case <-markerTick:
				c.followMarker(ctx)
			}
		}
	})
	c.logger.Info("inference_metrics connector started",
		zap.Duration("metrics_flush_interval", c.cfg.MetricsFlushInterval),
		zap.String("aggregation_temporality", string(c.cfg.AggregationTemporality)),
		zap.Int("aggregation_cardinality_limit", c.cfg.AggregationCardinalityLimit))
	return nil
}

// Shutdown stops the ticker and flushes what was aggregated since the last
// flush, so a delta interval is not lost. It is idempotent and safe without
// Start.
func (c *metricsConnector) Shutdown(ctx context.Context) error {
	var err error
	c.shutdownOnce.Do(func() {
		defer c.telemetry.Shutdown()
		defer c.steps.Shutdown()
		if c.cancel == nil {
			return
		}
		c.cancel()
		done := make(chan struct{})
		go func() {
			c.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		c.flush(ctx, true)
		// Stopped cleanly: the last window was flushed or counted as dropped.
		if err := c.writeMarker(ctx, 0); err != nil {
			c.logMarkerError(err)
		}
		c.closeMarker(ctx)
		c.logger.Info("inference_metrics connector stopped")
	})
	return err
}

// Capabilities says the connector only reads spans.
func (*metricsConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}
