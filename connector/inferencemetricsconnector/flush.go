// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
)

// flush builds the metrics under the lock and sends them outside it. In
// delta temporality a refused interval is put back into its series, so the
// next flush reports it (as the graphsignal exporter's delta converter does);
// only a permanent refusal, or one at shutdown, loses it, and is counted.
func (c *metricsConnector) flush(ctx context.Context, final bool) {
	now := pcommon.NewTimestampFromTime(c.clock.Now())
	c.mu.Lock()
	c.observeTurns(final)
	md, tx := c.store.Flush(now)
	c.series.Store(int64(c.store.Len()))
	taken := c.windowSpans
	c.mu.Unlock()
	var err error
	if md.ResourceMetrics().Len() > 0 {
		// The count first: the next consumer may own md once called.
		points := int64(md.DataPointCount())
		err = c.next.ConsumeMetrics(ctx, md)
		if err != nil {
			c.refused(ctx, err, points, tx, final)
		}
	}
	c.mu.Lock()
	keep := err != nil && !final && !consumererror.IsPermanent(err)
	if keep {
		c.store.Restore(tx)
	} else {
		c.store.Commit(tx)
	}
	c.mu.Unlock()
	if !keep {
		// Taken, or dropped and counted as dropped_points: either way no
		// longer what a crash would lose.
		c.windowFlushed(ctx, taken)
	}
}

func (c *metricsConnector) refused(ctx context.Context, err error, points int64, tx *aggregate.Tx, final bool) {
	c.telemetry.ConnectorInferenceMetricsRefusedFlushes.Add(ctx, 1)
	switch {
	case consumererror.IsPermanent(err) || final:
		c.telemetry.ConnectorInferenceMetricsDroppedPoints.Add(ctx, points)
		c.logger.Error("inference_metrics: next consumer refused metrics; dropped",
			zap.Int64("data_points", points), zap.Bool("shutdown", final), zap.Error(err))
	case tx.Len() > 0:
		c.logger.Warn("inference_metrics: next consumer refused metrics; the interval is kept for the next flush",
			zap.Int("series", tx.Len()), zap.Error(err))
	default:
		// Cumulative: the next flush carries the totals anyway.
		c.logger.Warn("inference_metrics: next consumer refused metrics; the next flush carries the totals", zap.Error(err))
	}
}
