// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package kineto reads PyTorch profiler (Kineto) Chrome-trace files into
// the same records the CUPTI injection library sends, so one aggregation
// serves both sources. It streams: a JSON tokenizer keeps only the fields it
// uses, records leave in batches, and memory is bounded by fixed caps, not
// by the size of the file.
package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
)

// Limits bound what one file may hold in memory.
type Limits struct {
	// Batch is how many records are held before they go to the handler.
	// A file with fewer GPU events is handed over whole, at its end, with
	// baseTimeNanoseconds applied wherever it appears in the file.
	Batch int
	// Intervals bounds the busy intervals kept per file (16 bytes each);
	// past it the smallest idle gaps are merged, overstating busy time by
	// their sum (Summary.BusyOverstated).
	Intervals int
	// NameBytes bounds the kernel-name table; later new names go to the
	// overflow id 0, which the aggregator sums as "other".
	NameBytes int
	// StepEvents, when positive, turns on step figures (Summary.Steps):
	// it bounds the ProfilerStep annotations, launches and kernels kept to
	// compute them, 32 bytes each; past it the steps are marked incomplete.
	// The handler must implement StepNames.
	StepEvents int
}

// DefaultLimits keep a file's state under about 40 MiB, whatever its size:
// 128 Ki records (7 MiB), 1 Mi intervals (16 MiB), 16 MiB of names; with
// step figures, 32 MiB more for 1 Mi launches and kernels.
var DefaultLimits = Limits{Batch: 1 << 17, Intervals: 1 << 20, NameBytes: 16 << 20}

// DefaultStepEvents is the StepEvents the receiver sets when it makes
// step spans.
const DefaultStepEvents = 1 << 20

// Handler receives a trace while it is read.
type Handler interface {
	// Kernel defines a kernel name id (from 1) before any record uses it;
	// name is valid only during the call.
	Kernel(id uint32, name []byte)
	// Records hands over a batch of records, valid only during the call.
	// Times are Unix ns when absolute is true; otherwise they are relative
	// to a baseTimeNanoseconds the file gives later (only a file with more
	// than Limits.Batch GPU events in PyTorch 2.x's layout, which writes
	// the base after the events).
	Records(recs []cuptiwire.Record, absolute bool)
}

// DeviceBusy is the union of a device's kernel, memcpy and memset time.
type DeviceBusy struct {
	Device uint16
	NS     uint64
}

// Summary is what a whole file held.
type Summary struct {
	Events    uint64 // trace events read
	Records   uint64 // GPU records handed over
	Lo, Hi    uint64 // Unix ns range of the records; 0, 0 when none
	Busy      []DeviceBusy
	Overflow  uint64 // records whose kernel name went to the overflow id
	Unordered bool   // some batch left before the base time was known
	// Steps are the ProfilerStep#N annotations and the GPU work each
	// launched, with Limits.StepEvents.
	Steps []Step
	// BusyOverstated bounds the idle time merged into busy time because a
	// device had more than Limits.Intervals separate busy intervals (a
	// later record inside a merged gap makes the real error smaller).
	BusyOverstated uint64
}

// ReadFile reads a .json or .json.gz trace file.
func ReadFile(path string, h Handler, lim Limits) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzipReader(f)
		if err != nil {
			return Summary{}, err
		}
		defer zr.Close()
		p := newPipeReader(zr)
		defer p.Close()
		r = p
	}
	return Read(r, h, lim)
}

// gzipReader decompresses with klauspost/compress, about twice as fast as
// the standard library's inflate on these files.
func gzipReader(r io.Reader) (*gzip.Reader, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	return zr, nil
}

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

// intervals is a sorted list of disjoint [lo, hi) busy intervals.
type intervals struct {
	iv, spare  [][2]uint64
	max        int
	overstated uint64
	gaps       []uint64
}

// merge adds records sorted by start.
func (s *intervals) merge(recs []cuptiwire.Record) {
	out := s.spare[:0]
	i := 0
	push := func(lo, hi uint64) {
		if n := len(out); n > 0 && lo <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], hi)
			return
		}
		out = append(out, [2]uint64{lo, hi})
	}
	for _, r := range recs {
		for i < len(s.iv) && s.iv[i][0] <= r.Start {
			push(s.iv[i][0], s.iv[i][1])
			i++
		}
		push(r.Start, r.End)
	}
	for ; i < len(s.iv); i++ {
		push(s.iv[i][0], s.iv[i][1])
	}
	s.iv, s.spare = out, s.iv
	if len(s.iv) > s.max {
		s.shrink()
	}
}

// shrink merges the smallest idle gaps until half the limit is used.
func (s *intervals) shrink() {
	s.gaps = s.gaps[:0]
	for i := 1; i < len(s.iv); i++ {
		s.gaps = append(s.gaps, s.iv[i][0]-s.iv[i-1][1])
	}
	slices.Sort(s.gaps)
	cut := s.gaps[len(s.iv)-s.max/2-1] // merging gaps up to this size leaves about max/2 intervals
	out := s.iv[:1]
	merged := len(s.iv) - s.max/2
	for i := 1; i < len(s.iv); i++ {
		gap := s.iv[i][0] - out[len(out)-1][1]
		if gap <= cut && merged > 0 {
			s.overstated += gap
			out[len(out)-1][1] = s.iv[i][1]
			merged--
			continue
		}
		out = append(out, s.iv[i])
	}
	s.iv = out
}

func (s *intervals) total() uint64 {
	var t uint64
	for _, v := range s.iv {
		t += v[1] - v[0]
	}
	return t
}

// MemcpyKind maps "Memcpy HtoD (Pageable -> Device)" to CUPTI's memcpy kind.
func MemcpyKind(name []byte) uint8 {
	switch string(secondField(name)) {
	case "HtoD":
		return 1
	case "DtoH":
		return 2
	case "HtoA":
		return 3
	case "AtoH":
		return 4
	case "AtoA":
		return 5
	case "AtoD":
		return 6
	case "DtoA":
		return 7
	case "DtoD":
		return 8
	case "HtoH":
		return 9
	case "PtoP":
		return 10
	}
	return 0
}

// secondField is the second white-space-separated word of b, as
// bytes.Fields(b)[1] would be, without allocating.
func secondField(b []byte) []byte {
	field := 0
	for i := 0; i < len(b); {
		for i < len(b) && asciiSpace(b[i]) {
			i++
		}
		j := i
		for j < len(b) && !asciiSpace(b[j]) {
			j++
		}
		if j > i {
			if field == 1 {
				return b[i:j]
			}
			field++
		}
		i = j
	}
	return nil
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// MemsetKind maps "Memset (Device)" to CUPTI's memory kind.
func MemsetKind(name []byte) uint8 {
	_, rest, ok := bytes.Cut(name, []byte("("))
	if !ok {
		return 0
	}
	switch string(bytes.TrimSuffix(rest, []byte(")"))) {
	case "Pageable":
		return 1
	case "Pinned":
		return 2
	case "Device":
		return 3
	case "Array":
		return 4
	case "Managed":
		return 5
	case "Device Static":
		return 6
	case "Managed Static":
		return 7
	}
	return 0
}

// SyncKind maps Kineto's "Stream Sync" and friends to CUPTI's sync type.
func SyncKind(s []byte) uint8 {
	switch string(s) {
	case "Event Sync":
		return 1
	case "Stream Wait Event":
		return 2
	case "Stream Sync":
		return 3
	case "Context Sync":
		return 4
	}
	return 0
}
