// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/stepwire"
)

const (
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
