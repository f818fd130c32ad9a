// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"context"

	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/stepwire"
)

// maxSources bounds the per-process state kept to turn the hooks'
// running counts into deltas; past it the least recently heard process
// is forgotten (and counted).
const maxSources = 4096

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
