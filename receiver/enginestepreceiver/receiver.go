// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/bindhint"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/stepstore"
	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/internal/unixsock"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
)

const (
	transport = "unixgram"
	// badLogInterval rate-limits the warnings about undecodable datagrams
	// and refused or faulty rings.
	badLogInterval = 10 * time.Second
	// maxSources bounds the per-process state kept to turn the hooks'
	// running counts into deltas; past it the least recently heard process
	// is forgotten (and counted).
	maxSources = 4096
	// waitAfterIdle is how long the socket and the rings stay quiet before
	// the read loop stops polling and waits on the socket. An engine under
	// load steps far more often, so it never pays for a wake-up.
	waitAfterIdle = 100 * time.Millisecond
	// ringSleep bounds a wait while rings are attached: a hook that read
	// the ring's sleep mark a moment before it was stored sends no wake,
	// and its record is read at the latest this much later.
	ringSleep = time.Second
	// reapInterval is how often the read loop checks whether the hooks
	// behind its rings are still running.
	reapInterval = time.Second
	// maxFDs is how many descriptors one datagram may bring (an
	// announcement brings two); more are closed by the kernel.
	maxFDs = 4
)

type engineStepReceiver struct {
	set  receiver.Settings
	cfg  *Config
	next consumer.Traces
	obs  *receiverhelper.ObsReport
	tb   *metadata.TelemetryBuilder
	host component.Host
	fd   int // the bound socket, -1 before Start; owned by the read loop once it runs
	stop int // write end of the pipe that wakes the read loop for Shutdown
	// waiting is true while the read loop waits on the socket (for tests).
	waiting atomic.Bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once

	// Owned by the read loop.
	rings  *rings
	dec    *stepwire.Decoder
	resets uint64 // dec.Resets() already counted
	step   stepwire.Step
	mark   stepwire.Mark
	// win takes the launch marks of executor workers (the collector's one
	// correlation window, docs/architecture.md); nil before Start.
	win     *gpuwindow.Window
	conv    converter
	sources map[sourceKey]*source
	tick    uint64 // orders sources by when they were last heard
	warn    *loglimit.Limiter
	now     func() time.Time
}

// source is what the receiver remembers of one hook process: its running
// counts, to turn them into deltas.
type source struct {
	dropped, evicted uint32
	heard            uint64
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
		rings:   newRings(),
		dec:     stepwire.NewDecoder(),
		conv:    newConverter(set.BuildInfo.Version),
		sources: map[sourceKey]*source{},
		warn:    loglimit.New(badLogInterval),
		now:     time.Now,
	}, nil
}

// Start opens the socket and starts reading; it returns at once.
func (r *engineStepReceiver) Start(_ context.Context, host component.Host) error {
	r.host = host
	// Workers' launch marks go to the step_store the config names, if any.
	win, err := stepstore.Lookup(host, r.cfg.StepStore, "step_store")
	if err != nil {
		return err
	}
	fd, err := listen(r.cfg.Endpoint)
	if err != nil {
		return bindhint.Wrap(err, "endpoint", "INFERPROF_STEP_ENDPOINT")
	}
	if r.cfg.ReadBufferSize > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, r.cfg.ReadBufferSize); err != nil {
			r.set.Logger.Warn("could not set the socket receive buffer", zap.Error(err))
		}
	}
	// Closing the pipe's write end wakes a read loop waiting in poll(2).
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		_ = unix.Close(fd)
		_ = os.Remove(r.cfg.Endpoint)
		return fmt.Errorf("engine_step: stop pipe: %w", err)
	}
	r.stop = pipe[1]
	r.win = win
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Go(func() {
		defer func() {
			_ = unix.Close(fd)
			_ = unix.Close(pipe[0])
			r.tb.ReceiverEngineStepRings.Add(context.Background(), -int64(len(r.rings.byID)))
			r.rings.closeAll()
		}()
		r.readLoop(ctx, fd, pipe[0])
	})
	r.set.Logger.Info("engine_step receiver started", zap.String("endpoint", r.cfg.Endpoint),
		zap.Duration("poll_interval", r.cfg.PollInterval))
	return nil
}

// Shutdown stops reading and removes the socket file; safe without Start
// and when called twice.
func (r *engineStepReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		started := r.cancel != nil
		if started {
			r.cancel()
			_ = unix.Close(r.stop)
			_ = os.Remove(r.cfg.Endpoint)
		}
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		r.tb.Shutdown()
		if started {
			r.set.Logger.Info("engine_step receiver stopped")
		}
	})
	return err
}

// listen binds a non-blocking Unix datagram socket in a private folder,
// owner-only. The socket is deliberately not an *os.File or net.Conn: those
// register it with Go's network poller, and a datagram arriving while the
// poller sleeps would then wake it from the sender's system call, on the
// engine's thread.
func listen(path string) (int, error) {
	if err := unixsock.Prepare(path, transport); err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open socket for %s: %w", path, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := unixsock.Restrict(path); err != nil {
		_ = unix.Close(fd)
		_ = os.Remove(path)
		return -1, err
	}
	return fd, nil
}

// readLoop reads the socket and the rings until ctx is done, in two modes.
// While steps flow it empties the socket and the rings every poll interval
// and nothing waits on the socket, so a hook never has to wake the
// collector. After waitAfterIdle without a step it marks the rings
// sleeping and waits on the socket with poll(2), so an idle collector costs
// nothing; the first datagram, or a ring's wake datagram, of the next burst
// wakes it, and so does a hook that exits.
func (r *engineStepReceiver) readLoop(ctx context.Context, fd, stop int) {
	// One byte over the limit tells an oversized datagram from a full one.
	buf := make([]byte, stepwire.MaxDatagram+1)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	record := func(b []byte) {
		r.tb.ReceiverEngineStepRingRecords.Add(ctx, 1)
		r.handle(ctx, b)
	}
	fault := func(err error) { r.ringFault(ctx, err) }
	timer := time.NewTimer(r.cfg.PollInterval)
	defer timer.Stop()
	idleSince := time.Now()
	nextReap := idleSince.Add(reapInterval)
	for ctx.Err() == nil {
		got := r.drain(ctx, fd, buf, oob)
		if r.rings.drain(buf, record, fault) {
			got = true
		}
		now := time.Now()
		if !now.Before(nextReap) {
			r.reap(ctx, buf, record, fault)
			nextReap = now.Add(reapInterval)
		}
		if got {
			idleSince = now
		} else if now.Sub(idleSince) >= waitAfterIdle {
			if r.rings.goToSleep() {
				r.waiting.Store(true)
				r.wait(fd, stop)
				r.waiting.Store(false)
				r.rings.wake()
				r.reap(ctx, buf, record, fault)
			}
			idleSince = time.Now()
			continue
		}
		timer.Reset(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// wait blocks until the socket or the stop pipe is readable, a hook behind
// a ring exits, or (with rings) ringSleep passes.
func (r *engineStepReceiver) wait(fd, stop int) {
	fds := r.rings.pollFDs([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}})
	timeout := -1
	if len(fds) > 2 {
		timeout = int(ringSleep / time.Millisecond)
	}
	for {
		_, err := unix.Poll(fds, timeout)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				componentstatus.ReportStatus(r.host, componentstatus.NewRecoverableErrorEvent(fmt.Errorf("wait for step datagrams: %w", err)))
			}
			return
		}
	}
}

// drain handles every datagram queued on the socket; it reports whether
// there was any.
func (r *engineStepReceiver) drain(ctx context.Context, fd int, buf, oob []byte) bool {
	got := false
	for ctx.Err() == nil {
		n, oobn, err := recvmsg(fd, buf, oob)
		switch {
		case err == nil:
			got = true
			var fds []int
			if oobn > 0 {
				fds = rights(oob[:oobn])
			}
			if c, ok := parseControl(buf[:n]); ok {
				r.control(ctx, c, fds)
				continue
			}
			closeFDs(fds) // a step datagram brings none
			r.handle(ctx, buf[:n])
		case errors.Is(err, unix.EAGAIN):
			return got
		case errors.Is(err, unix.EINTR):
		default:
			componentstatus.ReportStatus(r.host, componentstatus.NewRecoverableErrorEvent(fmt.Errorf("read step datagram: %w", err)))
			return got
		}
	}
	return got
}

// control handles a ring's control datagram: an announcement attaches the
// ring; a wake needs nothing more (it woke the read loop).
func (r *engineStepReceiver) control(ctx context.Context, c control, fds []int) {
	if c.kind != stepwire.ControlAnnounce {
		closeFDs(fds)
		if c.kind != stepwire.ControlWake {
			r.tb.ReceiverEngineStepBadDatagrams.Add(ctx, 1)
		}
		return
	}
	added, err := r.rings.attach(c.id, fds)
	switch {
	case err != nil:
		r.tb.ReceiverEngineStepRingsRefused.Add(ctx, 1)
		if n, ok := r.warn.Allow("ring", r.now()); ok {
			r.set.Logger.Warn("refused an engine step ring; that hook sends datagrams instead",
				zap.Error(err), zap.Int("suppressed_since_last", n))
		}
	case added:
		r.tb.ReceiverEngineStepRings.Add(ctx, 1)
		g := r.rings.byID[c.id]
		r.set.Logger.Debug("engine step ring attached", zap.Uint32("pid", g.r.Header.PID),
			zap.Uint32("capacity", g.r.Header.Capacity), zap.Uint64("unread_bytes", g.r.Unread()))
	}
}

// reap lets the rings of exited hooks go, after reading what they left.
func (r *engineStepReceiver) reap(ctx context.Context, buf []byte, record func([]byte), fault func(error)) {
	if n := r.rings.reap(buf, record, fault); n > 0 {
		r.tb.ReceiverEngineStepRings.Add(ctx, -int64(n))
	}
}

// ringFault counts a ring whose index or record frame was impossible; the
// reader skipped to the writer's position.
func (r *engineStepReceiver) ringFault(ctx context.Context, err error) {
	r.tb.ReceiverEngineStepRingFaults.Add(ctx, 1)
	if n, ok := r.warn.Allow("ring", r.now()); ok {
		r.set.Logger.Warn("skipped part of an engine step ring", zap.Error(err), zap.Int("suppressed_since_last", n))
	}
}

// recvmsg reads one datagram into buf and the descriptors sent with it
// into oob, without allocating (unix.Recvmsg allocates the sender's
// address). Received descriptors are close-on-exec.
func recvmsg(fd int, buf, oob []byte) (n, oobn int, err error) {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	msg := unix.Msghdr{Iov: &iov, Control: &oob[0]}
	msg.SetIovlen(1)
	msg.SetControllen(len(oob))
	got, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_CMSG_CLOEXEC)
	if e != 0 {
		return 0, 0, e
	}
	return int(got), int(msg.Controllen), nil
}

// rights returns the descriptors in control messages b.
func rights(b []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(b)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// handle decodes one datagram (a step, or an executor worker's launch
// mark) and passes its span (or mark) on. A bad datagram is counted and
// dropped; nothing else is lost.
func (r *engineStepReceiver) handle(ctx context.Context, b []byte) {
	if stepwire.IsMark(b) {
		r.handleMark(ctx, b)
		return
	}
	if err := r.dec.Decode(b, &r.step); err != nil {
		r.bad(ctx, err, len(b))
		return
	}
	if n := r.dec.Resets(); n != r.resets {
		r.tb.ReceiverEngineStepIDTableResets.Add(ctx, int64(n-r.resets))
		r.resets = n
	}
	s := &r.step
	r.countHookCounts(ctx, s)
	if s.IDsTruncated() {
		r.tb.ReceiverEngineStepTruncatedSteps.Add(ctx, 1)
	}
	if s.Degraded() {
		r.tb.ReceiverEngineStepDegradedSteps.Add(ctx, 1)
	}
	td := r.conv.traces(s)
	obsCtx := r.obs.StartTracesOp(ctx)
	err := r.next.ConsumeTraces(obsCtx, td)
	r.obs.EndTracesOp(obsCtx, "engine_step", 1, err)
	r.tb.ReceiverEngineStepSteps.Add(ctx, 1)
}

func (r *engineStepReceiver) bad(ctx context.Context, err error, size int) {
	r.tb.ReceiverEngineStepBadDatagrams.Add(ctx, 1)
	if n, ok := r.warn.Allow("datagram", r.now()); ok {
		r.set.Logger.Warn("dropped a bad engine step datagram",
			zap.Error(err), zap.Int("bytes", size), zap.Int("suppressed_since_last", n))
	}
}

// handleMark hands a worker's launch mark to the correlation window, which
// ties the worker's kernel launches to the engine's steps by it.
func (r *engineStepReceiver) handleMark(ctx context.Context, b []byte) {
	m := &r.mark
	if err := stepwire.DecodeMark(b, m); err != nil {
		r.bad(ctx, err, len(b))
		return
	}
	src := r.heardFrom(ctx, sourceKey{host: m.Host, pid: m.PID, index: markIndex})
	if d := delta(src.dropped, m.HookDropped); d > 0 {
		r.tb.ReceiverEngineStepHookDropped.Add(ctx, int64(d))
	}
	src.dropped = m.HookDropped
	r.tb.ReceiverEngineStepLaunchMarks.Add(ctx, 1)
	if r.win != nil {
		r.win.Mark(gpuwindow.MarkInfo{
			Host: m.Host, PID: m.PID, PPID: m.PPID, Instance: m.InstanceID, Batch: m.Batch,
			Start: m.StartUnixNs, End: m.EndUnixNs, ThreadID: m.ThreadID, Final: m.Final(),
			ScheduledTokens: m.ScheduledTokens,
		}, r.now())
	}
}

// markIndex keys a worker's running counts apart from any engine of the
// same process.
const markIndex = ^uint32(0)

// countHookCounts turns each hook's running counts (dropped datagrams,
// evicted ids) into deltas.
func (r *engineStepReceiver) countHookCounts(ctx context.Context, s *stepwire.Step) {
	src := r.heardFrom(ctx, sourceKey{host: s.Host, pid: s.PID, index: s.EngineIndex})
	if d := delta(src.dropped, s.HookDropped); d > 0 {
		r.tb.ReceiverEngineStepHookDropped.Add(ctx, int64(d))
	}
	if d := delta(src.evicted, s.HookEvictedIDs); d > 0 {
		r.tb.ReceiverEngineStepHookEvictedIds.Add(ctx, int64(d))
	}
	src.dropped, src.evicted = s.HookDropped, s.HookEvictedIDs
}

// heardFrom returns the running counts of hook k, tracked from now on if
// new, and marks it heard from.
func (r *engineStepReceiver) heardFrom(ctx context.Context, k sourceKey) *source {
	src := r.sources[k]
	if src == nil {
		if len(r.sources) >= maxSources {
			r.forgetOldestSource(ctx)
		}
		src = &source{}
		r.sources[k] = src
	}
	r.tick++
	src.heard = r.tick
	return src
}

// delta is how far a running count moved since last; a count below last
// restarted (a forked child, or a new process with the same pid).
func delta(last, now uint32) uint32 {
	if now >= last {
		return now - last
	}
	return now
}

// forgetOldestSource drops the source heard least recently. It scans the
// table, but runs only when a new process appears with the table full.
func (r *engineStepReceiver) forgetOldestSource(ctx context.Context) {
	var oldest sourceKey
	var at uint64
	first := true
	for k, v := range r.sources {
		if first || v.heard < at {
			oldest, at, first = k, v.heard, false
		}
	}
	delete(r.sources, oldest)
	r.tb.ReceiverEngineStepSourcesEvicted.Add(ctx, 1)
}
