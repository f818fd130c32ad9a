// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"cmp"
	"maps"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// Flush emits everything summed since the last flush as delta metrics
// ending at now, and resets the sums. It returns empty metrics when nothing
// arrived.
func (a *Aggregator) Flush(now pcommon.Timestamp) pmetric.Metrics {
	md, tx := a.FlushTx(now)
	a.Commit(tx)
	return md
}

// Tx is one flushed interval until the next consumer took it (Commit) or
// refused it with a retryable error (Restore). It holds the interval's raw
// sums, not the emitted pdata, so a restored interval is merged into the
// next one and emitted once, with the next interval's top_kernels choice.
type Tx struct {
	start   pcommon.Timestamp // the interval's start
	keys    []key
	vals    []value                           // by keys' index
	busy    []uint64                          // by busy slot
	srcSpan []span                            // by source
	chosen  map[chosenKey]map[uint32]struct{} // top_kernels choice before the flush
	ends    map[seriesKey]pcommon.Timestamp   // the emitted series' ends, kept at Commit
	now     pcommon.Timestamp
	hasData bool
}

// FlushTx is Flush with the interval held in a Tx: the caller passes the
// metrics on outside the lock, then calls Commit or Restore exactly once,
// before the next FlushTx. Sources released meanwhile are forgotten only at
// Commit, so a restored interval keeps its resources.
func (a *Aggregator) FlushTx(now pcommon.Timestamp) (pmetric.Metrics, *Tx) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tx := &Tx{start: a.last, now: now}
	a.mb.Reset(metadata.WithStartTime(a.last))
	a.last = now
	if len(a.vals) == 0 && len(a.busyIx) == 0 {
		return pmetric.NewMetrics(), tx
	}
	keys := make([]key, 0, len(a.slots))
	for k := range a.slots {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(x.src, y.src), cmp.Compare(x.device, y.device),
			cmp.Compare(x.kind, y.kind), cmp.Compare(x.sub, y.sub), cmp.Compare(x.series, y.series))
	})
	srcs := map[uint32]struct{}{}
	for k, i := range a.busyIx {
		if a.busyVals[i].busy > 0 {
			srcs[k.src] = struct{}{}
		}
	}
	for _, k := range keys {
		srcs[k.src] = struct{}{}
	}
	order := make([]uint32, 0, len(srcs))
	for s := range srcs {
		order = append(order, s)
	}
	slices.Sort(order)
	tx.chosen = maps.Clone(a.chosen)
	for _, src := range order {
		start, ts := tx.start, now
		if sp := a.srcSpan[src]; a.srcList[src].Kind == SourceKindKineto && sp.hi > sp.lo {
			start, ts = pcommon.Timestamp(sp.lo), pcommon.Timestamp(sp.hi)
		}
		a.emitSource(start, ts, src, keys)
	}
	tx.keys, tx.vals = keys, make([]value, len(keys))
	for i, k := range keys {
		tx.vals[i] = a.vals[a.slots[k]]
	}
	tx.srcSpan = slices.Clone(a.srcSpan)
	clear(a.srcSpan)
	tx.busy = make([]uint64, len(a.busyVals))
	for i := range a.busyVals {
		tx.busy[i] = a.busyVals[i].busy
		a.busyVals[i].busy = 0
	}
	tx.hasData = true
	clear(a.slots)
	a.vals = a.vals[:0]
	a.epoch++
	md := a.mb.Emit()
	tx.ends = a.continueStarts(md)
	return md, tx
}

// Commit ends a flushed interval the next consumer took, or one that is
// lost (a permanent refusal): sources no one holds are forgotten.
func (a *Aggregator) Commit(tx *Tx) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.commitEnds(tx.ends, tx.now)
	a.prune()
}

// Restore merges a refused interval back into the sums, so the next flush
// emits it with what arrived since, over both intervals. The key table keeps
// its MaxKeys bound: it returns the records it had no room for (the table
// filled meanwhile), which the caller counts as lost.
func (a *Aggregator) Restore(tx *Tx) (dropped uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = tx.start
	if !tx.hasData {
		return 0
	}
	a.chosen = tx.chosen
	for i, k := range tx.keys {
		v := tx.vals[i]
		s, ok := a.slots[k]
		if !ok {
			if len(a.vals) >= a.limits.MaxKeys {
				dropped += v.count
				continue
			}
			s = int32(len(a.vals))
			a.vals = append(a.vals, value{})
			a.slots[k] = s
		}
		a.vals[s].dur += v.dur
		a.vals[s].count += v.count
		a.vals[s].bytes += v.bytes
	}
	for i, b := range tx.busy {
		a.busyVals[i].busy += b // busy slots are freed only by Commit's prune
	}
	for i, sp := range tx.srcSpan {
		if sp.hi <= sp.lo {
			continue
		}
		cur := &a.srcSpan[i]
		if cur.hi <= cur.lo {
			*cur = sp
			continue
		}
		cur.lo, cur.hi = min(cur.lo, sp.lo), max(cur.hi, sp.hi)
	}
	return dropped
}

// Records is how many activity records the interval summed.
func (tx *Tx) Records() (n uint64) {
	for _, v := range tx.vals {
		n += v.count
	}
	return n
}

// Series is how many aggregation keys the interval holds.
func (tx *Tx) Series() int { return len(tx.keys) }
