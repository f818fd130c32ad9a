// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"
	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/metadata"
	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"
	"github.com/inferprof/inferprof/internal/bindhint"
	"github.com/inferprof/inferprof/internal/delta"
	"github.com/inferprof/inferprof/internal/hostcheck"
	"github.com/inferprof/inferprof/internal/stepspan"
)

// envEndpoint is what the shipped configs read the endpoint from.
const envEndpoint = "INFERPROF_UI_ENDPOINT"

// ui is what the traces and metrics exporters of one configured component
// share: the timeline, the dashboard's history and the listener.
type ui struct {
	cfg      *Config
	set      exporter.Settings
	logger   *zap.Logger
	tb       *metadata.TelemetryBuilder
	timeline *timeline.Store    // nil when the timeline is off
	steps    *stepspan.Reader   // the timeline's reader of engine.step spans
	history  *dashboard.History // nil when the dashboard is off
	started  time.Time
	now      func() time.Time

	// convMu makes convert and commit one step per batch.
	convMu sync.Mutex
	conv   *delta.Converter

	server *http.Server
	addr   net.Addr
	served chan struct{}
}

func newUI(set exporter.Settings, cfg *Config) (*ui, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create telemetry: %w", err)
	}
	now := time.Now
	u := &ui{cfg: cfg, set: set, logger: set.Logger, tb: tb, now: now, started: now()}
	// The dashboard charts per flush: it reads deltas, as the connector's
	// counters and histograms are cumulative by default.
	u.conv = delta.New(u.started, now)
	if cfg.Timeline.Enabled {
		u.timeline = timeline.New(cfg.Timeline.MemoryLimitMiB<<20, cfg.Timeline.MaxAge, now)
		if u.steps, err = stepspan.NewReader(set.TelemetrySettings); err != nil {
			return nil, err
		}
	}
	if cfg.Dashboard.Enabled {
		u.history = dashboard.NewHistory()
	}
	return u, nil
}

// Start opens the listener; sharedcomponent runs it once for all signals.
func (u *ui) Start(ctx context.Context, host component.Host) error {
	ln, err := u.cfg.ServerConfig.ToListener(ctx)
	if err != nil {
		return bindhint.Wrap(fmt.Errorf("endpoint %s: %w", u.cfg.ServerConfig.NetAddr.Endpoint, err), "endpoint", envEndpoint)
	}
	hosts, err := hostcheck.New(u.cfg.AllowedHosts)
	if err != nil {
		_ = ln.Close()
		return err
	}
	foreign := u.logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Minute, 1, 0)
	}))
	handler := hosts.Middleware(u.mux(), func(r *http.Request) {
		foreign.Warn("request refused, Host is not a loopback name nor in allowed_hosts",
			zap.String("host", r.Host), zap.String("path", r.URL.Path))
	})
	srv, err := u.cfg.ServerConfig.ToServer(ctx, host.GetExtensions(), u.set.TelemetrySettings, handler)
	if err != nil {
		_ = ln.Close()
		return err
	}
	u.addr = ln.Addr()
	if !isLoopback(u.cfg.ServerConfig.NetAddr.Endpoint) {
		u.logger.Warn("endpoint is not a loopback address: the dashboard and the timeline are readable from other hosts",
			zap.String("endpoint", u.cfg.ServerConfig.NetAddr.Endpoint))
	}
	base := "http://" + ln.Addr().String()
	if u.history != nil {
		u.logger.Info("Serving the dashboard", zap.String("url", base+"/"))
	}
	if u.timeline != nil {
		u.logger.Info("Serving the timeline", zap.String("url", base+"/timeline?last=60s"))
	}
	u.server = srv
	u.served = make(chan struct{})
	go func() {
		defer close(u.served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			u.logger.Error("UI listener stopped", zap.Error(err))
		}
	}()
	return nil
}

// Shutdown closes the listener; it may run without Start.
func (u *ui) Shutdown(ctx context.Context) error {
	defer u.tb.Shutdown()
	if u.steps != nil {
		defer u.steps.Shutdown()
	}
	if u.server == nil {
		return nil
	}
	err := u.server.Shutdown(ctx)
	select {
	case <-u.served:
	case <-ctx.Done():
	}
	u.server = nil
	return err
}

// mux is the routes: /timeline and the dashboard (/ and /dashboard.json),
// each when on. Health is health_check's.
func (u *ui) mux() *http.ServeMux {
	mux := http.NewServeMux()
	if u.timeline != nil {
		set := timeline.DefaultHandlerSettings
		set.MaxBytes = u.cfg.Timeline.MaxResponseMiB << 20
		mux.Handle("GET /timeline", timeline.NewHandler(u.timeline, set))
	}
	if u.history != nil {
		dashboard.Register(mux, dashboard.Source{
			Version: u.set.BuildInfo.Version, Start: u.started, Now: u.now,
			History: u.history, Timeline: u.timeline, Budget: u.cfg.Timeline.MemoryLimitMiB << 20,
		})
	}
	return mux
}

func (u *ui) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	u.applyTimeline(ctx, timeline.Collect(td, u.steps))
	return nil
}

// consumeLogs keeps the batch's error records for the dashboard.
func (u *ui) consumeLogs(_ context.Context, ld plog.Logs) error {
	if u.history != nil {
		u.history.AddErrors(dashboard.CollectLogs(ld))
	}
	return nil
}

// consumeMetrics feeds the dashboard the batch's deltas and the timeline
// its GPU readings.
func (u *ui) consumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	u.convMu.Lock()
	out, tx, st := u.conv.Convert(md)
	u.conv.Commit(tx)
	u.convMu.Unlock()
	if n := st.Unsupported + st.Overflow; n > 0 {
		u.tb.InferprofUIRefusedDatapoints.Add(ctx, int64(n))
	}
	if u.history != nil {
		u.history.Add(out)
	}
	if u.timeline != nil {
		u.applyTimeline(ctx, timeline.CollectMetrics(out))
	}
	return nil
}

func (u *ui) applyTimeline(ctx context.Context, b *timeline.Batch) {
	if b.Bad > 0 {
		u.tb.InferprofUITimelineBadSpans.Add(ctx, int64(b.Bad))
	}
	if b.Empty() {
		return
	}
	if n := u.timeline.Apply(b); n > 0 {
		u.tb.InferprofUITimelineEvictedRecords.Add(ctx, int64(n))
	}
}

// isLoopback reports whether a host:port listens on loopback only.
func isLoopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
