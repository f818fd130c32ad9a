// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/dashboard"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/timeline"
	"github.com/inferprof/inferprof/internal/bindhint"
	"github.com/inferprof/inferprof/internal/hostcheck"
	"github.com/inferprof/inferprof/internal/stepspan"
)

// shared is what the metrics, logs and traces exporters of one configured
// graphsignal component have in common: the instance id, the tags, the
// local store and its listener, the upload client. The collector builds one
// exporter per pipeline signal from the same *Config; they meet here.
type shared struct {
	cfg      *Config
	set      exporter.Settings
	logger   *zap.Logger
	enc      *encode.Encoder
	store    *local.Store       // nil when local.endpoint is empty
	timeline *timeline.Store    // nil when local.endpoint is empty or the timeline is off
	steps    *stepspan.Reader   // the timeline's reader of engine.step spans
	history  *dashboard.History // nil when local.endpoint is empty or the dashboard is off
	started  time.Time
	tb       *metadata.TelemetryBuilder
	up       *uploader // nil without api_key
	now      func() time.Time
	instance string

	mu      sync.Mutex
	users   int // exporters created and not yet shut down
	running int // exporters started and not yet shut down
	server  *http.Server
	addr    net.Addr // where the local endpoint listens
	served  chan struct{}
}

var (
	registryMu sync.Mutex
	registry   = map[*Config]*shared{}
)

func newInstanceID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// acquire returns the shared state for cfg, creating it on first use.
func acquire(set exporter.Settings, cfg *Config) (*shared, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s, ok := registry[cfg]; ok {
		s.mu.Lock()
		s.users++
		s.mu.Unlock()
		return s, nil
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create telemetry: %w", err)
	}
	now := time.Now
	s := &shared{cfg: cfg, set: set, logger: set.Logger, tb: tb, now: now, instance: newInstanceID(), users: 1}
	s.enc = encode.New(encode.OSEnvTags(), cfg.Tags, s.instance, now, encode.WithNames(cfg.Names))
	s.started = now()
	if cfg.Local.NetAddr.Endpoint != "" {
		s.store = local.New(set.BuildInfo.Version, s.enc.GlobalTags(), now)
		if cfg.Timeline.Enabled {
			s.timeline = timeline.New(cfg.Timeline.MemoryLimitMiB<<20, cfg.Timeline.MaxAge, now)
			if s.steps, err = stepspan.NewReader(set.TelemetrySettings); err != nil {
				return nil, err
			}
		}
		if cfg.Dashboard.Enabled {
			s.history = dashboard.NewHistory()
		}
	}
	if cfg.APIKey != "" {
		s.up = newUploader(cfg, set, tb)
	}
	registry[cfg] = s
	return s, nil
}

// start runs with each exporter's Start; the first builds the upload client
// (it may need extensions, so not before) and opens the local listener.
func (s *shared) start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running++
	if s.running > 1 {
		return nil
	}
	if err := s.startLocked(ctx, host); err != nil {
		s.running--
		return err
	}
	return nil
}

func (s *shared) startLocked(ctx context.Context, host component.Host) error {
	if s.up != nil {
		if err := s.up.start(ctx, host); err != nil {
			return fmt.Errorf("upload client: %w", err)
		}
		s.logger.Info("Uploading to Graphsignal", zap.String("endpoint", s.cfg.ClientConfig.Endpoint),
			zap.String("names", string(s.cfg.Names)), zap.String("instance.id", s.instance))
	} else {
		s.logger.Info("No api_key: nothing is uploaded to Graphsignal", zap.String("instance.id", s.instance))
	}
	if s.store == nil {
		return nil
	}
	ln, err := s.cfg.Local.ToListener(ctx)
	if err != nil {
		return bindhint.Wrap(fmt.Errorf("local.endpoint %s: %w", s.cfg.Local.NetAddr.Endpoint, err),
			"local.endpoint", "INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT")
	}
	hosts, err := hostcheck.New(s.cfg.LocalAllowedHosts)
	if err != nil {
		_ = ln.Close()
		return err
	}
	foreign := s.logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Minute, 1, 0)
	}))
	handler := hosts.Middleware(s.mux(), func(r *http.Request) {
		foreign.Warn("local listener: request refused, Host is not a loopback name nor in local_allowed_hosts",
			zap.String("host", r.Host), zap.String("path", r.URL.Path))
	})
	srv, err := s.cfg.Local.ToServer(ctx, host.GetExtensions(), s.set.TelemetrySettings, handler)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("local: %w", err)
	}
	s.addr = ln.Addr()
	if !local.IsLoopback(s.cfg.Local.NetAddr.Endpoint) {
		s.logger.Warn("local.endpoint is not a loopback address: /signals is readable from other hosts, without authentication",
			zap.String("endpoint", s.cfg.Local.NetAddr.Endpoint))
	}
	s.logger.Info("Serving signals locally", zap.String("url", "http://"+ln.Addr().String()+"/signals"))
	if s.history != nil {
		s.logger.Info("Serving the dashboard locally", zap.String("url", "http://"+ln.Addr().String()+"/"))
	}
	s.server = srv
	s.served = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("Local signals endpoint stopped", zap.Error(err))
		}
	}(s.server, s.served)
	return nil
}

// mux is the local listener's routes: /signals and /health, then
// /timeline and the dashboard (/ and /dashboard.json) when they are on.
func (s *shared) mux() *http.ServeMux {
	mux := local.NewMux(s.store)
	if s.timeline != nil {
		set := timeline.DefaultHandlerSettings
		set.MaxBytes = s.cfg.Timeline.MaxResponseMiB << 20
		mux.Handle("GET /timeline", timeline.NewHandler(s.timeline, set))
	}
	if s.history != nil {
		g := s.cfg.Dashboard.Goodput
		dashboard.Register(mux, dashboard.Source{
			Version: s.set.BuildInfo.Version, Start: s.started, Now: s.now,
			Targets: dashboard.Targets{TTFT: g.TimeToFirstToken.Seconds(), TPOT: g.TimePerOutputToken.Seconds(), E2E: g.E2E.Seconds()},
			History: s.history, Timeline: s.timeline, Budget: s.cfg.Timeline.MemoryLimitMiB << 20,
		})
	}
	return mux
}

// collected is what the timeline and the dashboard take from one batch,
// read before the batch goes on to the queue.
type collected struct {
	timeline *timeline.Batch
	history  *dashboard.History
}

// collectTraces reads the spans the timeline keeps; it only reads td.
func (s *shared) collectTraces(td ptrace.Traces) collected {
	if s.timeline == nil {
		return collected{}
	}
	return collected{timeline: timeline.Collect(td, s.steps)}
}

// collectMetrics reads what the dashboard and the timeline's GPU counters
// take from the metrics accepted (after the delta step); it only reads md.
func (s *shared) collectMetrics(md pmetric.Metrics) collected {
	var c collected
	if s.history != nil {
		c.history = dashboard.Collect(md)
	}
	if s.timeline != nil {
		c.timeline = timeline.CollectMetrics(md)
	}
	return c
}

// apply adds a batch the pipeline accepted.
func (s *shared) apply(ctx context.Context, c collected) {
	if c.history != nil {
		s.history.Merge(c.history)
	}
	if c.timeline == nil || c.timeline.Empty() && c.timeline.Bad == 0 {
		return
	}
	if c.timeline.Bad > 0 {
		s.tb.GraphsignalTimelineBadSpans.Add(ctx, int64(c.timeline.Bad))
	}
	if n := s.timeline.Apply(c.timeline); n > 0 {
		s.tb.GraphsignalTimelineEvictedRecords.Add(ctx, int64(n))
	}
}

// stop is called by each exporter's Shutdown, started or not; the last one
// stops the local endpoint and forgets cfg.
func (s *shared) stop(ctx context.Context, wasStarted bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wasStarted {
		s.running--
	}
	s.users--
	var err error
	if s.running == 0 && s.server != nil {
		err = s.server.Shutdown(ctx)
		select {
		case <-s.served:
		case <-ctx.Done():
		}
		s.server = nil
		s.logger.Info("Stopped serving signals locally")
	}
	if s.users <= 0 {
		registryMu.Lock()
		if registry[s.cfg] == s {
			delete(registry, s.cfg)
		}
		registryMu.Unlock()
		if s.up != nil {
			s.up.stop()
		}
		s.tb.Shutdown()
		s.steps.Shutdown()
	}
	return err
}

// record counts what an encoding changed or left out.
func (s *shared) record(ctx context.Context, st encode.Stats) {
	if st.Truncated > 0 {
		s.tb.GraphsignalTruncatedTags.Add(ctx, int64(st.Truncated))
	}
	if st.Skipped > 0 {
		s.tb.GraphsignalUnsupportedDatapoints.Add(ctx, int64(st.Skipped))
	}
	if st.FramesFolded > 0 {
		s.tb.GraphsignalFoldedFrames.Add(ctx, int64(st.FramesFolded))
	}
}

// lifecycle is the Start/Shutdown every signal's exporter shares: the
// shared state's, then exporterhelper's queue and retry when uploading.
type lifecycle struct {
	s       *shared
	inner   component.Component // nil without api_key
	mu      sync.Mutex
	started bool
	stopped bool
}

func (l *lifecycle) Start(ctx context.Context, host component.Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.s.start(ctx, host); err != nil {
		return err
	}
	l.started = true
	if l.inner != nil {
		return l.inner.Start(ctx, host)
	}
	return nil
}

func (l *lifecycle) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil
	}
	l.stopped = true
	var errs []error
	if l.inner != nil {
		// Drains the in-memory queue, or leaves the persistent one on disk.
		errs = append(errs, l.inner.Shutdown(ctx))
	}
	errs = append(errs, l.s.stop(ctx, l.started))
	return errors.Join(errs...)
}

func trimSlash(s string) string { return strings.TrimRight(s, "/") }
