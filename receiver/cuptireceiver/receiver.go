// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/bindhint"
	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/unixsock"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
)

// readBufferSize is each connection's read buffer: a few records frames.
const readBufferSize = 64 << 10

// enableSpans turns span sampling on only when a traces pipeline asked for
// the receiver and the config enables it.
func (r *cuptiReceiver) enableSpans() {
	if r.nextTraces != nil && r.cfg.Spans.Enabled {
		r.agg.EnableSpans(r.cfg.Spans.SamplingRatio, r.cfg.Spans.MaxPerInterval)
	}
}

// Start opens the socket and starts the accept and flush loops.
func (r *cuptiReceiver) Start(_ context.Context, host component.Host) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return nil // the other pipeline of a shared receiver started it
	}
	r.started = true
	r.mu.Unlock()
	r.host = host
	r.enableSpans()
	if err := r.windowStart(host); err != nil {
		return err
	}
	if err := r.openKinetoStorage(context.Background(), host); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if r.cfg.Endpoint != "" {
		ln, err := listen(r.cfg.Endpoint)
		if err != nil {
			cancel()
			return bindhint.Wrap(err, "endpoint", "INFERPROF_CUPTI_ENDPOINT")
		}
		r.ln = ln
		r.wg.Go(func() { r.accept(ctx) })
	}
	r.wg.Go(func() { r.flushLoop(ctx) })
	r.set.Logger.Info("cupti receiver started",
		zap.String("endpoint", r.cfg.Endpoint),
		zap.String("kineto.directory", r.cfg.Kineto.Directory),
		zap.Duration("collection_interval", r.cfg.CollectionInterval))
	return nil
}

// listen opens the Unix socket in a private folder, owner-only.
func listen(path string) (net.Listener, error) {
	if err := unixsock.Prepare(path, "unix"); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := unixsock.Restrict(path); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

func (r *cuptiReceiver) accept(ctx context.Context) {
	var delay time.Duration // backoff on accept errors such as EMFILE, as net/http does
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			componentstatus.ReportStatus(r.host, componentstatus.NewRecoverableErrorEvent(fmt.Errorf("accept: %w", err)))
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		r.mu.Lock()
		if r.stopping || len(r.conns) >= r.cfg.MaxConnections {
			r.mu.Unlock()
			// Counted and logged before the close, so that a client that
			// sees its connection end also finds it counted.
			r.tb.ReceiverCuptiConnectionsRejected.Add(ctx, 1)
			r.badLog.Warn("cupti connection rejected: max_connections reached", zap.Int("max_connections", r.cfg.MaxConnections))
			_ = conn.Close()
			continue
		}
		r.conns[conn] = struct{}{}
		r.mu.Unlock()
		r.tb.ReceiverCuptiConnections.Add(ctx, 1)
		r.wg.Go(func() { r.serve(ctx, conn) })
	}
}

func (r *cuptiReceiver) serve(ctx context.Context, conn net.Conn) {
	h := &connHandler{agg: r.agg, tb: r.tb, ctx: ctx, log: r.badLog, now: r.now, quietAfter: r.cfg.QuietAfter,
		corr: connCorrelation{c: r.corr}, libs: &r.libs}
	defer func() {
		h.closeCorrelation()
		r.mu.Lock()
		delete(r.conns, conn)
		r.mu.Unlock()
		_ = conn.Close()
		if h.held {
			r.agg.Release(h.srcIdx)
		}
	}()
	err := cuptiwire.NewDecoder(bufio.NewReaderSize(idleConn{conn, r.cfg.IdleTimeout}, readBufferSize), h).Run()
	if err == nil || ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.tb.ReceiverCuptiIdleConnections.Add(ctx, 1)
		r.badLog.Warn("cupti connection closed: nothing received for idle_timeout", zap.Uint32("pid", h.src.PID),
			zap.Duration("idle_timeout", r.cfg.IdleTimeout))
		return
	}
	if isBadInput(err) {
		r.tb.ReceiverCuptiBadConnections.Add(ctx, 1)
		r.badLog.Warn("cupti connection dropped: bad input", zap.Uint32("pid", h.src.PID), zap.String("host", h.src.Host), zap.Error(err))
		return
	}
	r.badLog.Info("cupti connection closed", zap.Uint32("pid", h.src.PID), zap.Error(err))
}

// idleConn moves the read deadline on before every read, so a connection
// ends after timeout without a byte. A bufio reader in front makes that one
// deadline per buffer, not per record.
type idleConn struct {
	net.Conn
	timeout time.Duration
}

func (c idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func isBadInput(err error) bool {
	for _, e := range []error{
		io.ErrUnexpectedEOF, cuptiwire.ErrBadMagic, cuptiwire.ErrBadVersion, cuptiwire.ErrFrameTooLarge,
		cuptiwire.ErrUnknownFrame, cuptiwire.ErrBadPayload, cuptiwire.ErrUnknownRecord, cuptiwire.ErrUndefinedName,
		cuptiwire.ErrHelloMissing, cuptiwire.ErrBadTimestamps, cuptiwire.ErrStringIDBounds, errSourcesFull,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (h *connHandler) Hello(hl cuptiwire.Hello) error {
	h.src = aggregate.Source{Kind: aggregate.SourceKindCUPTI, Host: string(hl.Host), PID: hl.PID, Flags: hl.Flags}
	idx, ok := h.agg.Source(h.src)
	if !ok {
		return fmt.Errorf("pid %d: %w", hl.PID, errSourcesFull)
	}
	h.srcIdx, h.held = idx, true
	h.lib = libraryKey{host: h.src.Host, pid: hl.PID, start: hl.StartUnixNS}
	h.stats = h.libs.last(h.lib)
	return nil
}

func (h *connHandler) String(id uint32, s []byte) error {
	if int(id) >= len(h.kernels) {
		h.kernels = append(h.kernels, make([]uint32, int(id)+1-len(h.kernels))...)
	}
	h.kernels[id] = h.agg.Kernel(s)
	return nil
}

func (h *connHandler) Records(recs []cuptiwire.Record) error {
	h.agg.Add(h.srcIdx, recs, h.kernels, h.cacheOf())
	h.correlate(recs)
	return nil
}

// Stats turns the library's cumulative counters into counter increments.
func (h *connHandler) Stats(s cuptiwire.Stats) error {
	if d := s.DroppedRecords - h.stats.DroppedRecords; s.DroppedRecords > h.stats.DroppedRecords && h.tb != nil {
		h.tb.ReceiverCuptiEngineDroppedRecords.Add(h.ctx, int64(d))
	}
	if d := s.CUPTIDropped - h.stats.CUPTIDropped; s.CUPTIDropped > h.stats.CUPTIDropped && h.tb != nil {
		h.tb.ReceiverCuptiCuptiDroppedRecords.Add(h.ctx, int64(d))
	}
	if d := s.PoolExhausted - h.stats.PoolExhausted; s.PoolExhausted > h.stats.PoolExhausted && h.tb != nil {
		h.tb.ReceiverCuptiPoolExhausted.Add(h.ctx, int64(d))
	}
	if d := s.OverflowDropped - h.stats.OverflowDropped; s.OverflowDropped > h.stats.OverflowDropped && h.tb != nil {
		h.tb.ReceiverCuptiOverflowDroppedRecords.Add(h.ctx, int64(d))
	}
	if d := s.RateLimited - h.stats.RateLimited; s.RateLimited > h.stats.RateLimited && h.tb != nil {
		h.tb.ReceiverCuptiRateLimitedRecords.Add(h.ctx, int64(d))
	}
	if d := s.GraphTableResets - h.stats.GraphTableResets; s.GraphTableResets > h.stats.GraphTableResets && h.tb != nil {
		h.tb.ReceiverCuptiEngineGraphTableResets.Add(h.ctx, int64(d))
	}
	h.reportEngineLaunchDrops(h.stats.LaunchesDropped, s.LaunchesDropped)
	h.stats = s
	h.libs.store(h.lib, s)
	return nil
}

// Liveness turns a stream that went quiet while its engine kept launching
// kernels into a warning and a count: another profiler most likely took
// CUPTI's activity callbacks (the library says so with LiveDisplaced), or
// CUPTI stopped delivering for longer than quiet_after.
func (h *connHandler) Liveness(l cuptiwire.Liveness) error {
	now := h.now()
	if h.progress.IsZero() || l.BuffersCompleted != h.live.BuffersCompleted {
		h.progress = now
	}
	launching := l.Launches > h.live.Launches
	quiet := launching && l.State&cuptiwire.LiveDutyOff == 0 &&
		(l.State&cuptiwire.LiveDisplaced != 0 || now.Sub(h.progress) >= h.quietAfter)
	switch {
	case quiet && !h.quiet:
		h.quiet = true
		if h.tb != nil {
			h.tb.ReceiverCuptiQuietStreams.Add(h.ctx, 1)
		}
		h.log.Warn("cupti stream went quiet while the engine launches kernels: another profiler (torch.profiler, nsys) may hold CUPTI's activity callbacks",
			zap.Uint32("pid", h.src.PID), zap.String("host", h.src.Host),
			zap.Duration("since_last_buffer", now.Sub(h.progress)), zap.Bool("library_saw_takeover", l.State&cuptiwire.LiveDisplaced != 0),
			zap.Uint32("free_buffers", l.FreeBuffers), zap.Uint32("total_buffers", l.TotalBuffers))
	case h.quiet && l.BuffersCompleted != h.live.BuffersCompleted:
		h.quiet = false
		h.log.Info("cupti stream delivers again", zap.Uint32("pid", h.src.PID), zap.Uint32("resumes", l.Resumes))
	}
	h.live = l
	return nil
}

// maxClockError is the clock error past which kernel times cannot be placed
// against request spans to the step; it is logged once per connection.
const maxClockError = time.Millisecond

// Clock notes a CUPTI-to-Unix clock offset the library could not pin down.
func (h *connHandler) Clock(c cuptiwire.Clock) error {
	if time.Duration(c.ErrorNS) > maxClockError && !h.clockWarned {
		h.clockWarned = true
		h.log.Warn("cupti clock offset is uncertain; kernel times may be off by this much",
			zap.Uint32("pid", h.src.PID), zap.Duration("error", time.Duration(c.ErrorNS)))
	}
	return nil
}

func (r *cuptiReceiver) flushLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.CollectionInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.scanKineto(ctx)
			r.flush(ctx, false)
		}
	}
}

// flush emits the sums; the consumer is called outside the aggregator lock.
// final is the flush at shutdown, the last chance to deliver.
func (r *cuptiReceiver) flush(ctx context.Context, final bool) {
	// Spans first: Flush forgets sources whose connections closed.
	if r.nextTraces != nil {
		var link aggregate.Linker
		if r.corr != nil {
			link = r.corr.link
		}
		if td := r.agg.FlushSpans(link); td.SpanCount() > 0 {
			if err := r.nextTraces.ConsumeTraces(ctx, td); err != nil {
				r.badLog.Warn("cupti kernel spans refused by the next consumer", zap.Int("spans", td.SpanCount()), zap.Error(err))
			}
		}
	}
	r.flushMetrics(ctx, final)
}

// flushMetrics hands the interval to the next consumer as a transaction, as
// the inference_metrics connector does with its delta interval: a retryable
// refusal (memory_limiter's) puts the sums back, merged into the next
// interval within the aggregator's key limit; a permanent one, or one at
// shutdown, loses them, counted.
func (r *cuptiReceiver) flushMetrics(ctx context.Context, final bool) {
	m, tx := r.agg.FlushTx(pcommon.NewTimestampFromTime(r.now()))
	var err error
	if m.DataPointCount() > 0 && r.nextMetrics != nil {
		// Counted first: the next consumer may own m once called.
		points := m.DataPointCount()
		if err = r.nextMetrics.ConsumeMetrics(ctx, m); err != nil {
			r.tb.ReceiverCuptiRefusedFlushes.Add(ctx, 1)
			r.refused(ctx, err, points, tx, final)
		}
	}
	if err == nil || final || consumererror.IsPermanent(err) {
		r.agg.Commit(tx)
	} else if lost := r.agg.Restore(tx); lost > 0 {
		r.tb.ReceiverCuptiRefusedDroppedRecords.Add(ctx, int64(lost))
		r.set.Logger.Warn("cupti: a refused interval did not fit back into the key table; records lost",
			zap.Uint64("records", lost))
	}
	recs, dropped := r.agg.Stats()
	r.tb.ReceiverCuptiRecords.Add(ctx, int64(recs-r.lastRec))
	r.tb.ReceiverCuptiDroppedRecords.Add(ctx, int64(dropped-r.lastDrop))
	r.lastRec, r.lastDrop = recs, dropped
	r.reportGraphOverflow(ctx)
}

// refused logs one line per refused flush, saying what was kept or lost.
func (r *cuptiReceiver) refused(ctx context.Context, err error, points int, tx *aggregate.Tx, final bool) {
	if final || consumererror.IsPermanent(err) {
		r.tb.ReceiverCuptiRefusedDroppedRecords.Add(ctx, int64(tx.Records()))
		r.set.Logger.Error("cupti metrics refused by the next consumer; dropped",
			zap.Int("data_points", points), zap.Uint64("records", tx.Records()),
			zap.Bool("shutdown", final), zap.Error(err))
		return
	}
	r.set.Logger.Warn("cupti metrics refused by the next consumer; the interval is kept for the next flush",
		zap.Int("data_points", points), zap.Int("series", tx.Series()), zap.Uint64("records", tx.Records()),
		zap.Error(err))
}

// Shutdown stops accepting, closes every connection, waits for the loops
// and flushes what was summed so nothing received is lost.
func (r *cuptiReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.shutOnce.Do(func() {
		if r.cancel == nil {
			return
		}
		r.mu.Lock()
		r.stopping = true
		for c := range r.conns {
			_ = c.Close()
		}
		r.mu.Unlock()
		r.cancel()
		if r.ln != nil {
			_ = r.ln.Close()
		}
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		r.flush(ctx, true)
		if r.store != nil {
			if cerr := r.store.Close(ctx); cerr != nil {
				r.set.Logger.Warn("kineto.storage: close", zap.Error(cerr))
			}
		}
		r.tb.Shutdown()
		r.set.Logger.Info("cupti receiver stopped")
	})
	return err
}
