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
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/delta"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/metadata"
)

// shared is what the metrics, logs and traces exporters of one configured
// graphsignal component have in common: the instance id, the tags, the
// local store and its listener, the HTTP client. The collector builds one
// exporter per pipeline signal from the same *Config; they meet here.
type shared struct {
	cfg      *Config
	logger   *zap.Logger
	enc      *encode.Encoder
	store    *local.Store // nil when local_endpoint is empty
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
	s := &shared{cfg: cfg, logger: set.Logger, tb: tb, now: now, instance: newInstanceID(), users: 1}
	s.enc = encode.New(encode.OSEnvTags(), cfg.Tags, s.instance, now)
	if cfg.LocalEndpoint != "" {
		s.store = local.New(set.BuildInfo.Version, s.enc.GlobalTags(), now)
	}
	if cfg.APIKey != "" {
		s.up = &uploader{
			client:    &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
			base:      trimSlash(cfg.Endpoint),
			apiKey:    string(cfg.APIKey),
			userAgent: "inferprof-graphsignal-exporter/" + set.BuildInfo.Version,
			logger:    set.Logger,
			tb:        tb,
		}
	}
	registry[cfg] = s
	return s, nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// start starts the local endpoint with the first exporter.
func (s *shared) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running++
	if s.running > 1 {
		return nil
	}
	if s.up != nil {
		s.logger.Info("Uploading to Graphsignal", zap.String("endpoint", s.cfg.Endpoint), zap.String("instance.id", s.instance))
	} else {
		s.logger.Info("No api_key: nothing is uploaded to Graphsignal", zap.String("instance.id", s.instance))
	}
	if s.store == nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.LocalEndpoint)
	if err != nil {
		s.running--
		return fmt.Errorf("local_endpoint %s: %w", s.cfg.LocalEndpoint, err)
	}
	s.addr = ln.Addr()
	if !local.IsLoopback(s.cfg.LocalEndpoint) {
		s.logger.Warn("local_endpoint is not a loopback address: /signals is readable from other hosts, without authentication",
			zap.String("local_endpoint", s.cfg.LocalEndpoint))
	}
	s.logger.Info("Serving signals locally", zap.String("url", "http://"+ln.Addr().String()+"/signals"))
	s.server = local.NewServer(s.store)
	s.served = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("Local signals endpoint stopped", zap.Error(err))
		}
	}(s.server, s.served)
	return nil
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
		s.tb.Shutdown()
	}
	return err
}

// lifecycle is the Start/Shutdown every signal's exporter shares.
type lifecycle struct {
	s       *shared
	inner   component.Component // exporterhelper's queue, retry and timeout; nil without api_key
	mu      sync.Mutex
	started bool
	stopped bool
}

func (l *lifecycle) Start(ctx context.Context, host component.Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.s.start(); err != nil {
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

func (*lifecycle) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func helperOptions(cfg *Config) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(cfg.TimeoutConfig),
		exporterhelper.WithRetry(cfg.RetryConfig),
		exporterhelper.WithQueue(cfg.QueueConfig),
	}
}

// metricsExporter turns metrics into deltas before the sending queue, so
// that what is queued, persisted and retried is exactly one upload's worth.
type metricsExporter struct {
	lifecycle
	conv  *delta.Converter
	inner exporter.Metrics
	// consumeMu makes convert, enqueue and commit one step: a batch the
	// queue refuses leaves the delta state as it was.
	consumeMu sync.Mutex
}

func newMetricsExporter(s *shared, set exporter.Settings) (*metricsExporter, error) {
	e := &metricsExporter{conv: delta.New(s.now(), s.now)}
	e.s = s
	if s.up != nil {
		inner, err := exporterhelper.NewMetrics(context.Background(), set, s.cfg, e.push, helperOptions(s.cfg)...)
		if err != nil {
			return nil, err
		}
		e.inner = inner
		e.lifecycle.inner = inner
	}
	return e, nil
}

func (e *metricsExporter) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	out, err := e.convert(ctx, md)
	if err != nil || out.DataPointCount() == 0 {
		return err
	}
	if e.s.store != nil {
		req, st := e.s.enc.Metrics(out)
		e.record(ctx, st)
		if n := e.s.store.Apply(req); n > 0 {
			e.s.tb.GraphsignalLocalDroppedSeries.Add(ctx, int64(n))
		}
	}
	return nil
}

func (e *metricsExporter) convert(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	e.consumeMu.Lock()
	defer e.consumeMu.Unlock()
	out, tx, st := e.conv.Convert(md)
	if n := st.Unsupported + st.Overflow; n > 0 {
		e.s.tb.GraphsignalUnsupportedDatapoints.Add(ctx, int64(n))
	}
	if e.inner != nil && out.DataPointCount() > 0 {
		if err := e.inner.ConsumeMetrics(ctx, out); err != nil {
			return out, err
		}
	}
	e.conv.Commit(tx)
	return out, nil
}

func (e *metricsExporter) record(ctx context.Context, st encode.Stats) {
	if st.Truncated > 0 {
		e.s.tb.GraphsignalTruncatedTags.Add(ctx, int64(st.Truncated))
	}
	if st.Skipped > 0 {
		e.s.tb.GraphsignalUnsupportedDatapoints.Add(ctx, int64(st.Skipped))
	}
}

// push runs after the queue: encode and upload one batch of deltas.
func (e *metricsExporter) push(ctx context.Context, md pmetric.Metrics) error {
	req, st := e.s.enc.Metrics(md)
	e.record(ctx, st)
	if len(req.Metrics) == 0 {
		return nil
	}
	return e.s.up.send(ctx, ingestPath, req, md.DataPointCount())
}

type logsExporter struct {
	lifecycle
	inner exporter.Logs
}

func newLogsExporter(s *shared, set exporter.Settings) (*logsExporter, error) {
	e := &logsExporter{}
	e.s = s
	if s.up != nil {
		inner, err := exporterhelper.NewLogs(context.Background(), set, s.cfg, e.push, helperOptions(s.cfg)...)
		if err != nil {
			return nil, err
		}
		e.inner = inner
		e.lifecycle.inner = inner
	}
	return e, nil
}

func (e *logsExporter) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if e.inner != nil {
		if err := e.inner.ConsumeLogs(ctx, ld); err != nil {
			return err
		}
	}
	if e.s.store != nil {
		req, st := e.s.enc.Logs(ld)
		if st.Truncated > 0 {
			e.s.tb.GraphsignalTruncatedTags.Add(ctx, int64(st.Truncated))
		}
		e.s.store.Apply(req)
	}
	return nil
}

func (e *logsExporter) push(ctx context.Context, ld plog.Logs) error {
	req, st := e.s.enc.Logs(ld)
	if st.Truncated > 0 {
		e.s.tb.GraphsignalTruncatedTags.Add(ctx, int64(st.Truncated))
	}
	if len(req.LogBatches) == 0 {
		return nil
	}
	return e.s.up.send(ctx, ingestPath, req, ld.LogRecordCount())
}

// tracesExporter is the opt-in traces mode: spans go to the v0 endpoint.
type tracesExporter struct {
	lifecycle
	inner exporter.Traces
}

func newTracesExporter(s *shared, set exporter.Settings) (*tracesExporter, error) {
	e := &tracesExporter{}
	e.s = s
	inner, err := exporterhelper.NewTraces(context.Background(), set, s.cfg, e.push, helperOptions(s.cfg)...)
	if err != nil {
		return nil, err
	}
	e.inner = inner
	e.lifecycle.inner = inner
	return e, nil
}

func (e *tracesExporter) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return e.inner.ConsumeTraces(ctx, td)
}

func (e *tracesExporter) push(ctx context.Context, td ptrace.Traces) error {
	req, st := e.s.enc.Spans(td)
	if st.Truncated > 0 {
		e.s.tb.GraphsignalTruncatedTags.Add(ctx, int64(st.Truncated))
	}
	if len(req.Spans) == 0 {
		return nil
	}
	return e.s.up.send(ctx, signalsPath, req, td.SpanCount())
}
