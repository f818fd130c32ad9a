package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
)

const (
	ingestPath  = "/api/v1/ingest"
	signalsPath = "/api/v1/signals/" // v0, traces mode; the trailing slash is Graphsignal's
	// maxErrorBody caps how much of an error response is read for the log.
	maxErrorBody = 1024
	// keyLogEvery rate-limits the "API key refused" error log.
	keyLogEvery = time.Minute
)

var gzipPool = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// gzipProto marshals msg and gzips it, as Graphsignal's uploader does.
func gzipProto(msg proto.Message) ([]byte, error) {
	raw, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("marshal upload: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(raw)/4 + 64)
	zw := gzipPool.Get().(*gzip.Writer)
	defer gzipPool.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("gzip upload: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip upload: %w", err)
	}
	return buf.Bytes(), nil
}

// uploader posts gzipped protobuf bodies to Graphsignal and classifies the
// answer for exporterhelper's retry sender.
type uploader struct {
	client     *http.Client
	base       string
	apiKey     string
	userAgent  string
	logger     *zap.Logger
	tb         *metadata.TelemetryBuilder
	lastKeyLog atomic.Int64
}

// send posts msg to path; items is how many datapoints, log records or
// spans it carries, for the rejection counters.
func (u *uploader) send(ctx context.Context, path string, msg proto.Message, items int) error {
	body, err := gzipProto(msg)
	if err != nil {
		return consumererror.NewPermanent(err)
	}
	url := u.base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("X-API-Key", u.apiKey)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
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
		now := time.Now().UnixNano()
		if last := u.lastKeyLog.Load(); now-last >= int64(keyLogEvery) && u.lastKeyLog.CompareAndSwap(last, now) {
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
