package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/internal/unixsock"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
)

const (
	transport = "unixgram"
	// badLogInterval rate-limits the warning about undecodable datagrams.
	badLogInterval = 10 * time.Second
	// maxSources bounds the per-process state kept to turn the hooks'
	// running drop counts into deltas; past it the table starts over.
	maxSources = 4096
)

type engineStepReceiver struct {
	set    receiver.Settings
	cfg    *Config
	next   consumer.Traces
	obs    *receiverhelper.ObsReport
	tb     *metadata.TelemetryBuilder
	host   component.Host
	conn   *net.UnixConn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// Owned by the read loop.
	dec     *stepwire.Decoder
	step    stepwire.Step
	conv    converter
	dropped map[sourceKey]uint32
	badLog  rateLimiter
	now     func() time.Time
}

type sourceKey struct {
	host  string
	pid   uint32
	index uint32
}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Traces) (*engineStepReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID:             set.ID,
		Transport:              transport,
		ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &engineStepReceiver{
		set: set, cfg: cfg, next: next, obs: obs, tb: tb,
		dec:     stepwire.NewDecoder(),
		conv:    newConverter(set.BuildInfo.Version),
		dropped: map[sourceKey]uint32{},
		now:     time.Now,
	}, nil
}

// Start opens the socket and starts reading; it returns at once.
func (r *engineStepReceiver) Start(_ context.Context, host component.Host) error {
	r.host = host
	conn, err := listen(r.cfg.Endpoint)
	if err != nil {
		return err
	}
	if r.cfg.ReadBufferSize > 0 {
		if err := conn.SetReadBuffer(r.cfg.ReadBufferSize); err != nil {
			r.set.Logger.Warn("could not set the socket receive buffer", zap.Error(err))
		}
	}
	r.conn = conn
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Go(func() { r.readLoop(ctx) })
	r.set.Logger.Info("engine_step receiver started", zap.String("endpoint", r.cfg.Endpoint))
	return nil
}

// Shutdown stops reading and removes the socket file; safe without Start
// and when called twice.
func (r *engineStepReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
		if r.conn != nil {
			err = r.conn.Close()
			_ = os.Remove(r.cfg.Endpoint)
		}
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
		}
		r.tb.Shutdown()
		if r.conn != nil {
			r.set.Logger.Info("engine_step receiver stopped")
		}
	})
	return err
}

// listen binds the Unix datagram socket in a private folder, owner-only.
func listen(path string) (*net.UnixConn, error) {
	if err := unixsock.Prepare(path, transport); err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram(transport, &net.UnixAddr{Name: path, Net: transport})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := unixsock.Restrict(path); err != nil {
		_ = conn.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return conn, nil
}

func (r *engineStepReceiver) readLoop(ctx context.Context) {
	// One byte over the limit tells an oversized datagram from a full one.
	buf := make([]byte, stepwire.MaxDatagram+1)
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			componentstatus.ReportStatus(r.host, componentstatus.NewRecoverableErrorEvent(fmt.Errorf("read step datagram: %w", err)))
			continue
		}
		r.handle(ctx, buf[:n])
	}
}

// handle decodes one datagram and passes its span on. A bad datagram is
// counted and dropped; nothing else is lost.
func (r *engineStepReceiver) handle(ctx context.Context, b []byte) {
	if err := r.dec.Decode(b, &r.step); err != nil {
		r.tb.ReceiverEngineStepBadDatagrams.Add(ctx, 1)
		if n, ok := r.badLog.allow(r.now(), badLogInterval); ok {
			r.set.Logger.Warn("dropped a bad engine step datagram",
				zap.Error(err), zap.Int("bytes", len(b)), zap.Int("suppressed_since_last", n))
		}
		return
	}
	s := &r.step
	r.countHookDrops(ctx, s)
	if s.IDsTruncated() {
		r.tb.ReceiverEngineStepTruncatedSteps.Add(ctx, 1)
	}
	td := r.conv.traces(s)
	obsCtx := r.obs.StartTracesOp(ctx)
	err := r.next.ConsumeTraces(obsCtx, td)
	r.obs.EndTracesOp(obsCtx, "engine_step", 1, err)
	r.tb.ReceiverEngineStepSteps.Add(ctx, 1)
}

// countHookDrops turns each hook's running drop count into deltas.
func (r *engineStepReceiver) countHookDrops(ctx context.Context, s *stepwire.Step) {
	k := sourceKey{host: s.Host, pid: s.PID, index: s.EngineIndex}
	last, seen := r.dropped[k]
	if !seen && len(r.dropped) >= maxSources {
		clear(r.dropped)
	}
	var delta uint32
	switch {
	case s.HookDropped >= last:
		delta = s.HookDropped - last
	default:
		delta = s.HookDropped // the count restarted: a forked child or a new process with the same pid
	}
	r.dropped[k] = s.HookDropped
	if delta > 0 {
		r.tb.ReceiverEngineStepHookDropped.Add(ctx, int64(delta))
	}
}

// rateLimiter lets one event through per interval and counts the rest.
type rateLimiter struct {
	last       time.Time
	suppressed int
}

func (l *rateLimiter) allow(now time.Time, every time.Duration) (suppressed int, ok bool) {
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return n, true
}
