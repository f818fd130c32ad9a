// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
	"github.com/inferprof/inferprof/internal/loglimit"
)

const (
	ingestPath  = "/api/v1/ingest"
	signalsPath = "/api/v1/signals/" // v0, traces mode; the trailing slash is Graphsignal's
	// maxErrorBody caps how much of an error response is read for the log.
	maxErrorBody = 1024
	// logEvery rate-limits the upload failure warnings and the "API key
	// refused" error: one line a minute, with how many were not logged.
	logEvery = time.Minute
)

// uploader posts protobuf bodies to Graphsignal through a confighttp client
// (which gzips them) and classifies the answer for exporterhelper's retry
// sender.
type uploader struct {
	cfg       *Config
	set       exporter.Settings
	client    *http.Client
	base      string
	userAgent string
	logger    *zap.Logger
	tb        *metadata.TelemetryBuilder

	// logs limits the retryable-failure warning ("upload") and the API key
	// error ("api_key"); failures counts retryable failures since the last
	// success.
	logs     *loglimit.Limiter
	failures atomic.Int64
}

func newUploader(cfg *Config, set exporter.Settings, tb *metadata.TelemetryBuilder) *uploader {
	return &uploader{
		cfg:       cfg,
		set:       set,
		base:      trimSlash(cfg.ClientConfig.Endpoint),
		userAgent: "inferprof-graphsignal-exporter/" + set.BuildInfo.Version,
		logger:    set.Logger,
		tb:        tb,
		logs:      loglimit.New(logEvery),
	}
}

// trimSlash drops an endpoint's trailing slashes: the paths carry their own.
func trimSlash(s string) string { return strings.TrimRight(s, "/") }

// start builds the client; confighttp needs the host's extensions for
// auth and middlewares.
func (u *uploader) start(ctx context.Context, host component.Host) error {
	client, err := u.cfg.ClientConfig.ToClient(ctx, host.GetExtensions(), u.set.TelemetrySettings)
	if err != nil {
		return err
	}
	u.client = client
	return nil
}

func (u *uploader) stop() {
	if u.client != nil {
		u.client.CloseIdleConnections()
	}
}

// send posts msg to path; items is how many datapoints, log records or
// spans it carries, for the rejection counters and logs.
func (u *uploader) send(ctx context.Context, path string, msg proto.Message, items int) error {
	err := u.post(ctx, path, msg, items)
	switch {
	case err == nil:
		if n := u.failures.Swap(0); n > 0 {
			u.logs.Reset("upload")
			u.logger.Info("Graphsignal uploads succeed again", zap.Int64("failed_attempts", n))
		}
	case !consumererror.IsPermanent(err):
		u.failures.Add(1)
		if n, ok := u.logs.Allow("upload", time.Now()); ok {
			u.logger.Warn("Graphsignal upload failed; retrying with backoff (retry_on_failure)",
				zap.Error(err), zap.Int("items", items), zap.Int("failed_attempts_not_logged", n))
		}
	}
	return err
}

func (u *uploader) post(ctx context.Context, path string, msg proto.Message, items int) error {
	body, err := proto.Marshal(msg)
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("marshal upload: %w", err))
	}
	url := u.base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("X-API-Key", string(u.cfg.APIKey))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("User-Agent", u.userAgent)
	resp, err := u.client.Do(req)
	if err != nil {
		// Connection refused, reset or timed out: retryable.
		return fmt.Errorf("upload to %s: %w", url, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 64*1024)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return u.classify(ctx, url, resp, strings.TrimSpace(string(excerpt)), items)
}

func (u *uploader) classify(ctx context.Context, url string, resp *http.Response, excerpt string, items int) error {
	code := resp.StatusCode
	err := fmt.Errorf("upload to %s: HTTP %d: %s", url, code, excerpt)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		if _, ok := u.logs.Allow("api_key", time.Now()); ok {
			u.logger.Error("Graphsignal refused the API key; uploads are dropped until api_key is fixed",
				zap.Int("status", code), zap.String("url", url))
		}
		return consumererror.NewPermanent(fmt.Errorf("API key refused: %w", err))
	case code == http.StatusBadRequest:
		u.logger.Warn("Graphsignal rejected an upload as malformed; dropping it",
			zap.Int("status", code), zap.String("url", url), zap.Int("items", items), zap.String("response", excerpt))
		u.tb.GraphsignalRejectedUploads.Add(ctx, 1)
		u.tb.GraphsignalRejectedItems.Add(ctx, int64(items))
		return consumererror.NewPermanent(err)
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return exporterhelper.NewThrottleRetry(err, d)
		}
		return err
	default:
		// Any other 4xx will fail the same way again.
		return consumererror.NewPermanent(err)
	}
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		// Bound absurd values so a bad header cannot park the queue for years.
		return time.Duration(min(s, int64(time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
