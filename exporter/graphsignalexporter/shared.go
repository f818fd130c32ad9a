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
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
	"github.com/inferprof/inferprof/internal/bindhint"
	"github.com/inferprof/inferprof/internal/hostcheck"
	"github.com/inferprof/inferprof/internal/sharedcomponent"
)

// shared is what the metrics, logs and traces exporters of one configured
// graphsignal component have in common: the instance id, the tags, the
// /signals store and its listener, the upload client. The collector builds
// one exporter per pipeline signal from the same *Config; they meet here,
// through sharedcomponent, which starts and stops it once.
type shared struct {
	cfg      *Config
	set      exporter.Settings
	logger   *zap.Logger
	enc      *encode.Encoder
	store    *local.Store // nil when local.endpoint is empty
	tb       *metadata.TelemetryBuilder
	up       *uploader // nil without api_key
	now      func() time.Time
	instance string

	server *http.Server
	addr   net.Addr // where the local endpoint listens
	served chan struct{}
}

var instances = sharedcomponent.NewMap[*Config, *shared]()

func newInstanceID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// acquire returns the shared state for cfg, creating it on first use.
func acquire(set exporter.Settings, cfg *Config) (*sharedcomponent.Component[*shared], error) {
	return instances.LoadOrStore(cfg, func() (*shared, error) { return newShared(set, cfg) })
}

func newShared(set exporter.Settings, cfg *Config) (*shared, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create telemetry: %w", err)
	}
	now := time.Now
	s := &shared{cfg: cfg, set: set, logger: set.Logger, tb: tb, now: now, instance: newInstanceID()}
	s.enc = encode.New(encode.OSEnvTags(), cfg.Tags, s.instance, now, encode.WithNames(cfg.Names))
	if cfg.Local.NetAddr.Endpoint != "" {
		s.store = local.New(set.BuildInfo.Version, s.enc.GlobalTags(), now)
	}
	if cfg.APIKey != "" {
		s.up = newUploader(cfg, set, tb)
	}
	return s, nil
}

// Start builds the upload client (it may need extensions, so not before)
// and opens the local listener.
func (s *shared) Start(ctx context.Context, host component.Host) error {
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
	handler := hosts.Middleware(local.NewMux(s.store), func(r *http.Request) {
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

// Shutdown stops the local endpoint and the upload client; it may run
// without Start.
func (s *shared) Shutdown(ctx context.Context) error {
	var err error
	if s.server != nil {
		err = s.server.Shutdown(ctx)
		select {
		case <-s.served:
		case <-ctx.Done():
		}
		s.server = nil
		s.logger.Info("Stopped serving signals locally")
	}
	if s.up != nil {
		s.up.stop()
	}
	s.tb.Shutdown()
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
// Shutdown drains this signal's queue before the shared state stops.
type lifecycle struct {
	s       *shared
	sc      *sharedcomponent.Component[*shared]
	inner   component.Component // nil without api_key
	mu      sync.Mutex
	stopped bool
}

func (l *lifecycle) Start(ctx context.Context, host component.Host) error {
	if err := l.sc.Start(ctx, host); err != nil {
		return err
	}
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
	errs = append(errs, l.sc.Shutdown(ctx))
	return errors.Join(errs...)
}
