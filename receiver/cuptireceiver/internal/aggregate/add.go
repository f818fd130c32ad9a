// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// Add aggregates a batch of records from source src. kernels maps a record's
// Name (a per-connection string id) to a series index from Kernel; ids it
// does not cover fall into the overflow series. It returns how many records
// were dropped because the key table was full.
func (a *Aggregator) Add(src uint32, recs []cuptiwire.Record, kernels []uint32, c *Cache) (dropped int) {
	return a.add(src, recs, kernels, c, true, true)
}

// AddTrace aggregates records of a Kineto trace. A trace is read in
// batches in no particular time order, so its busy time and time range
// come from the reader (AddTraceRange, AddBusy), not from the records;
// spans are sampled only from records with Unix times (absolute).
func (a *Aggregator) AddTrace(src uint32, recs []cuptiwire.Record, kernels []uint32, c *Cache, absolute bool) (dropped int) {
	return a.add(src, recs, kernels, c, false, absolute)
}

// AddTraceRange extends the time range the source's points span this
// interval with a trace's [lo, hi), in Unix ns.
func (a *Aggregator) AddTraceRange(src uint32, lo, hi uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(src) >= len(a.srcSpan) || hi <= lo {
		return
	}
	sp := &a.srcSpan[src]
	if sp.lo == 0 || lo < sp.lo {
		sp.lo = lo
	}
	sp.hi = max(sp.hi, hi)
}

// AddBusy adds a device's busy time, computed elsewhere, to the interval.
func (a *Aggregator) AddBusy(src uint32, device uint16, ns uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ns > 0 {
		a.busyVals[a.busySlot(busyKey{src: src, device: device})].busy += ns
	}
}

func (a *Aggregator) add(src uint32, recs []cuptiwire.Record, kernels []uint32, c *Cache, sweep, spans bool) (dropped int) {
	if len(c.kern) < len(kernels) {
		c.kern = append(c.kern, make([]slotRef, len(kernels)-len(c.kern))...)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		var ref *slotRef
		switch {
		case r.Kind == cuptiwire.RecordKindKernel:
			if int(r.Name) < len(c.kern) {
				ref = &c.kern[r.Name]
			}
		case r.Kind >= cuptiwire.RecordKindMemcpy && r.Kind <= cuptiwire.RecordKindSync && r.Sub < 16:
			ref = &c.other[r.Kind-cuptiwire.RecordKindMemcpy][r.Sub]
		}
		var slot int32
		if ref != nil && ref.epoch == a.epoch && ref.device == r.Device {
			slot = ref.slot
		} else {
			var ok bool
			if slot, ok = a.slot(src, r, kernels, c); !ok {
				dropped++
				continue
			}
			if ref != nil {
				*ref = slotRef{epoch: a.epoch, device: r.Device, slot: slot}
			}
		}
		v := &a.vals[slot]
		v.dur += r.End - r.Start
		v.count++
		v.bytes += r.Bytes
		if spans && a.spanStride > 0 && (r.Kind == cuptiwire.RecordKindKernel || r.Kind == cuptiwire.RecordKindGraph) {
			a.sampleSpan(src, r, kernels, c)
		}
		if sweep && r.Kind != cuptiwire.RecordKindSync && r.Device != cuptiwire.DeviceUnknown {
			var b int32
			if int(r.Device) < len(c.busy) && c.busy[r.Device] > 0 {
				b = c.busy[r.Device] - 1
			} else {
				b = a.busySlot(busyKey{src: src, device: r.Device})
				if int(r.Device) < len(c.busy) {
					c.busy[r.Device] = b + 1
				}
			}
			a.busyVals[b].sweep(r.Start, r.End)
		}
	}
	a.records += uint64(len(recs) - dropped)
	a.dropped += uint64(dropped)
	return dropped
}

// slot finds or makes the slot of a record's key.
func (a *Aggregator) slot(src uint32, r *cuptiwire.Record, kernels []uint32, c *Cache) (int32, bool) {
	k := key{src: src, kind: r.Kind, device: r.Device}
	refused := false
	switch r.Kind {
	case cuptiwire.RecordKindKernel:
		if int(r.Name) < len(kernels) {
			k.series = kernels[r.Name]
		}
	case cuptiwire.RecordKindMemcpy, cuptiwire.RecordKindMemset, cuptiwire.RecordKindSync:
		k.sub = r.Sub
	case cuptiwire.RecordKindGraph:
		// One record per graph launch, so graph records skip the slot
		// cache and look their graph id up here: a missing id is unknown.
		k.series, refused = c.graphSignature(r.GraphID)
	}
	s, ok := a.slots[k]
	if !ok {
		if len(a.vals) >= a.limits.MaxKeys {
			return 0, false
		}
		s = int32(len(a.vals))
		a.vals = append(a.vals, value{})
		a.slots[k] = s
	}
	if refused {
		a.sigOverflow++
	}
	return s, true
}

// busySlot finds or makes a device's busy state; these live across flushes
// because the union's end carries over.
func (a *Aggregator) busySlot(k busyKey) int32 {
	if s, ok := a.busyIx[k]; ok {
		return s
	}
	if n := len(a.busyFree); n > 0 {
		s := a.busyFree[n-1]
		a.busyFree = a.busyFree[:n-1]
		a.busyIx[k] = s
		return s
	}
	s := int32(len(a.busyVals))
	a.busyVals = append(a.busyVals, busyState{})
	a.busyIx[k] = s
	return s
}

// sweep adds [start, end) to the device's busy union. It is exact when
// records arrive in start order per device, which CUPTI buffers nearly give;
// an out-of-order record that lies wholly before the union's end adds
// nothing. (Kineto traces bring their own union: AddBusy.)
func (s *busyState) sweep(start, end uint64) {
	switch {
	case start >= s.end:
		s.busy += end - start
		s.end = end
	case end > s.end:
		s.busy += end - s.end
		s.end = end
	}
}

// Stats returns the records aggregated and dropped since New.
func (a *Aggregator) Stats() (records, dropped uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.records, a.dropped
}
