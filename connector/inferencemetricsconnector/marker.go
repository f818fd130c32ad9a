// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

// The window marker records, in the storage extension the config names, how
// many spans the open flush window has aggregated. A SIGKILL loses that
// window; the marker is how the next start knows, and counts it. The
// aggregation itself is not persisted: writing every series each second would
// cost far more than one 16-byte key, and the loss is bounded by the window.

const (
	markerKey = "window"
	// markerEvery is how often the marker follows the open window: a crash
	// loses up to this much more than the marker says.
	markerEvery = time.Second
	markerLen   = 16
)

var errMarkerLength = errors.New("window marker: wrong length")

// marker is the persisted state: spans aggregated since the window opened
// (the last flush the next consumer took), and when it opened.
type marker struct {
	spans  uint64
	opened time.Time
}

func (m marker) encode() []byte {
	b := make([]byte, markerLen)
	binary.LittleEndian.PutUint64(b[:8], m.spans)
	binary.LittleEndian.PutUint64(b[8:], uint64(m.opened.UnixNano()))
	return b
}

func decodeMarker(b []byte) (marker, error) {
	if len(b) != markerLen {
		return marker{}, fmt.Errorf("%w: %d bytes, want %d", errMarkerLength, len(b), markerLen)
	}
	return marker{
		spans:  binary.LittleEndian.Uint64(b[:8]),
		opened: time.Unix(0, int64(binary.LittleEndian.Uint64(b[8:]))).UTC(),
	}, nil
}

// storageClient finds the storage extension by id, as exporterhelper's
// persistent queue does.
func storageClient(ctx context.Context, host component.Host, storageID, owner component.ID) (storage.Client, error) {
	ext, ok := host.GetExtensions()[storageID]
	if !ok {
		return nil, fmt.Errorf("storage: extension %q not found (add it under service::extensions)", storageID)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", storageID)
	}
	return se.GetClient(ctx, component.KindConnector, owner, "")
}

// openMarker reads what the last run left: a window it did not flush is
// counted and logged once, then the marker starts a new window.
func (c *metricsConnector) openMarker(ctx context.Context, host component.Host) error {
	client, err := storageClient(ctx, host, *c.cfg.Storage, c.id)
	if err != nil {
		return err
	}
	b, err := client.Get(ctx, markerKey)
	switch {
	case err != nil:
		_ = client.Close(ctx)
		return fmt.Errorf("storage: reading the window marker: %w", err)
	case b == nil: // first start on this storage
	default:
		m, derr := decodeMarker(b)
		switch {
		case derr != nil:
			c.logger.Warn("inference_metrics: window marker unreadable; what the last run lost is not counted", zap.Error(derr))
		case m.spans > 0:
			c.telemetry.ConnectorInferenceMetricsLostOnRestartSpans.Add(ctx, int64(m.spans))
			c.telemetry.ConnectorInferenceMetricsLostOnRestartWindows.Add(ctx, 1)
			c.logger.Warn("inference_metrics: the last run stopped without flushing its window (killed?); the figures of these spans are lost",
				zap.Uint64("spans", m.spans), zap.Time("window_opened", m.opened),
				zap.Duration("metrics_flush_interval", c.cfg.MetricsFlushInterval))
		}
	}
	c.markerClient = client
	c.markerOpened = c.clock.Now()
	if err := c.writeMarker(ctx, 0); err != nil {
		c.markerClient = nil
		_ = client.Close(ctx)
		return err
	}
	return nil
}

// writeMarker records spans for the open window. Only the flush goroutine
// calls it (and Start and Shutdown, when that goroutine is not running).
func (c *metricsConnector) writeMarker(ctx context.Context, spans uint64) error {
	if c.markerClient == nil {
		return nil
	}
	if err := c.markerClient.Set(ctx, markerKey, marker{spans: spans, opened: c.markerOpened}.encode()); err != nil {
		return fmt.Errorf("storage: writing the window marker: %w", err)
	}
	c.markerSpans.Store(int64(spans))
	return nil
}

// followMarker writes the open window's span count when it has changed.
func (c *metricsConnector) followMarker(ctx context.Context) {
	c.mu.Lock()
	spans := c.windowSpans
	c.mu.Unlock()
	if int64(spans) == c.markerSpans.Load() {
		return
	}
	if err := c.writeMarker(ctx, spans); err != nil {
		c.logMarkerError(err)
	}
}

// windowFlushed closes the window a flush took (taken spans) and opens the
// next with what arrived meanwhile.
func (c *metricsConnector) windowFlushed(ctx context.Context, taken uint64) {
	c.mu.Lock()
	c.windowSpans -= taken
	left := c.windowSpans
	c.mu.Unlock()
	if c.markerClient == nil {
		return
	}
	c.markerOpened = c.clock.Now()
	if err := c.writeMarker(ctx, left); err != nil {
		c.logMarkerError(err)
	}
}

// logMarkerError logs a storage error once a minute at most: the marker is
// best effort, the metrics go on.
func (c *metricsConnector) logMarkerError(err error) {
	now := c.clock.Now()
	if now.Sub(c.markerErrLogged) < time.Minute && !c.markerErrLogged.IsZero() {
		return
	}
	c.markerErrLogged = now
	c.logger.Warn("inference_metrics: window marker not written; a crash now would go uncounted", zap.Error(err))
}

func (c *metricsConnector) closeMarker(ctx context.Context) {
	if c.markerClient == nil {
		return
	}
	if err := c.markerClient.Close(ctx); err != nil {
		c.logger.Warn("inference_metrics: closing storage", zap.Error(err))
	}
	c.markerClient = nil
}
