// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
)

// reader turns events into records and keeps the per-file state.
type reader struct {
	h       Handler
	lim     Limits
	names   map[string]uint32
	nameLen int
	nextID  uint32
	batch   []cuptiwire.Record
	busy    map[uint16]*intervals
	sum     Summary
	base    uint64
	hasBase bool
	lo, hi  uint64 // relative to base when emitted before it was known
	sorted  []cuptiwire.Record
	steps   *stepCollector // nil without step figures
}

// Read decodes one trace from r.
func Read(r io.Reader, h Handler, lim Limits) (Summary, error) {
	rd := &reader{h: h, lim: lim, names: map[string]uint32{}, nextID: 1, busy: map[uint16]*intervals{}}
	rd.batch = make([]cuptiwire.Record, 0, min(lim.Batch, 4096))
	want := GPUCategories
	names, stepNames := h.(StepNames)
	if lim.StepEvents > 0 && stepNames {
		rd.steps = &stepCollector{max: lim.StepEvents}
		want = AllCategories
	}
	d := NewDecoder(r, want)
	var ev Event
	for {
		ok, err := d.Next(&ev)
		if err != nil {
			return rd.sum, err
		}
		if !ok {
			break
		}
		rd.sum.Events++
		if !rd.hasBase {
			rd.base, rd.hasBase = d.Base()
		}
		if err := rd.add(&ev); err != nil {
			return rd.sum, fmt.Errorf("traceEvents[%d] (%q): %w", rd.sum.Events-1, ev.Name, err)
		}
	}
	rd.base, rd.hasBase = d.Base()
	if err := rd.flush(true); err != nil {
		return rd.sum, err
	}
	if rd.sum.Records > 0 {
		rd.sum.Lo, rd.sum.Hi = rd.lo, rd.hi
		if rd.sum.Unordered {
			if rd.hi+rd.base < rd.hi {
				return rd.sum, fmt.Errorf("baseTimeNanoseconds %d overflows timestamps: %w", rd.base, ErrNotTrace)
			}
			rd.sum.Lo, rd.sum.Hi = rd.lo+rd.base, rd.hi+rd.base
		}
	}
	for dev, iv := range rd.busy {
		rd.sum.Busy = append(rd.sum.Busy, DeviceBusy{Device: dev, NS: iv.total()})
		rd.sum.BusyOverstated += iv.overstated
	}
	if rd.steps != nil {
		rd.sum.Steps = rd.steps.steps(rd.base, names, gpuwindow.NewDefaultConfig().TopKernels)
	}
	slices.SortFunc(rd.sum.Busy, func(a, b DeviceBusy) int { return int(a.Device) - int(b.Device) })
	return rd.sum, nil
}

func kindOf(c Category) cuptiwire.RecordKind {
	switch c {
	case CatKernel:
		return cuptiwire.RecordKindKernel
	case CatMemcpy:
		return cuptiwire.RecordKindMemcpy
	case CatMemset:
		return cuptiwire.RecordKindMemset
	case CatSync:
		return cuptiwire.RecordKindSync
	}
	return 0
}

func (rd *reader) add(ev *Event) error {
	kind := kindOf(ev.Cat)
	if rd.steps != nil && kind == 0 && ev.Phase == 'X' {
		rd.steps.add(ev, 0) // an annotation or a launch
	}
	if kind == 0 || ev.Phase != 'X' {
		return nil
	}
	if ev.TSErr != nil {
		return ev.TSErr
	}
	if !ev.HasTS {
		return errors.New("ts: missing")
	}
	if !ev.HasDur {
		return errors.New("dur: missing")
	}
	if ev.TS+ev.Dur < ev.TS {
		return errors.New("ts plus dur overflows")
	}
	rec := cuptiwire.Record{
		Kind:        kind,
		Device:      cuptiwire.DeviceUnknown,
		Stream:      uint32(ev.Stream),
		Start:       ev.TS,
		End:         ev.TS + ev.Dur,
		Correlation: uint32(ev.Corr),
	}
	if ev.Device >= 0 && ev.Device < int64(cuptiwire.DeviceUnknown) {
		rec.Device = uint16(ev.Device)
	}
	if ev.Bytes > 0 {
		rec.Bytes = uint64(ev.Bytes)
	}
	switch kind {
	case cuptiwire.RecordKindKernel:
		rec.Name = rd.nameID(ev.Name)
		if rd.steps != nil {
			rd.steps.add(ev, rec.Name)
		}
	case cuptiwire.RecordKindMemcpy:
		rec.Sub = MemcpyKind(ev.Name)
	case cuptiwire.RecordKindMemset:
		rec.Sub = MemsetKind(ev.Name)
	case cuptiwire.RecordKindSync:
		s := ev.SyncKind
		if len(s) == 0 {
			s = ev.Name
		}
		rec.Sub = SyncKind(s)
	}
	rd.batch = append(rd.batch, rec)
	if len(rd.batch) >= rd.lim.Batch {
		return rd.flush(false)
	}
	return nil
}

// nameID returns the id of a kernel name, defining it with the handler the
// first time; past the name-table limit new names get the overflow id 0.
func (rd *reader) nameID(name []byte) uint32 {
	if id, ok := rd.names[string(name)]; ok {
		return id
	}
	if rd.nextID >= cuptiwire.MaxStringID || rd.nameLen+len(name) > rd.lim.NameBytes {
		rd.sum.Overflow++
		return 0
	}
	id := rd.nextID
	rd.nextID++
	rd.names[string(name)] = id
	rd.nameLen += len(name)
	rd.h.Kernel(id, name)
	return id
}

// flush hands the held records over and adds them to the busy intervals.
// Before the last batch of a file whose base time is still unknown the
// records stay relative, and the summary says so.
func (rd *reader) flush(last bool) error {
	if len(rd.batch) == 0 {
		return nil
	}
	base := uint64(0)
	if rd.hasBase {
		base = rd.base
	} else if !last {
		rd.sum.Unordered = true
	}
	if rd.sum.Unordered {
		base = 0 // every batch of the file in one time frame; Read shifts lo and hi
	}
	for i := range rd.batch {
		r := &rd.batch[i]
		if r.End+base < r.End {
			return fmt.Errorf("baseTimeNanoseconds %d overflows timestamps: %w", base, ErrNotTrace)
		}
		r.Start += base
		r.End += base
		if rd.sum.Records == 0 && i == 0 || r.Start < rd.lo {
			rd.lo = r.Start
		}
		rd.hi = max(rd.hi, r.End)
	}
	rd.h.Records(rd.batch, !rd.sum.Unordered)
	rd.sum.Records += uint64(len(rd.batch))
	rd.addBusy()
	rd.batch = rd.batch[:0]
	return nil
}

// addBusy merges the batch's kernel, memcpy and memset intervals into each
// device's union (synchronization is host time and is left out).
func (rd *reader) addBusy() {
	rd.sorted = rd.sorted[:0]
	for _, r := range rd.batch {
		if r.Kind != cuptiwire.RecordKindSync && r.Device != cuptiwire.DeviceUnknown && r.End > r.Start {
			rd.sorted = append(rd.sorted, r)
		}
	}
	slices.SortFunc(rd.sorted, func(a, b cuptiwire.Record) int {
		if a.Device != b.Device {
			return int(a.Device) - int(b.Device)
		}
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	for i := 0; i < len(rd.sorted); {
		j := i
		for j < len(rd.sorted) && rd.sorted[j].Device == rd.sorted[i].Device {
			j++
		}
		iv := rd.busy[rd.sorted[i].Device]
		if iv == nil {
			iv = &intervals{max: max(rd.lim.Intervals, 2)}
			rd.busy[rd.sorted[i].Device] = iv
		}
		iv.merge(rd.sorted[i:j])
		i = j
	}
}
