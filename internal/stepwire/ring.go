// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// The shared-memory ring the hook writes step records to
// (integrations/python/inferprof_hook/ring.py; docs/step-wire.md, "Ring").
// The writer is another process and may be buggy or hostile: every value
// read from the shared memory is checked before use, each record is copied
// out before it is decoded, and an impossible index is an error, never a
// panic or an out-of-bounds read.
const (
	// RingHeaderBytes is where records start; the header holds the ring's
	// identity and the shared indexes.
	RingHeaderBytes = 4096
	// RingVersion is the ring layout version this reader understands.
	RingVersion = 1
	// Capacity bounds: a power of two. The hook makes 64 KiB to 64 MiB;
	// the reader also accepts the small rings its tests and fuzzing use.
	RingMinCapacity = 16
	RingMaxCapacity = 64 << 20

	ringOffWrite       = 64  // u64, writer: bytes written since the ring was made
	ringOffRead        = 128 // u64, reader: bytes consumed
	ringOffSleep       = 136 // u64, reader: odd while it waits for a wake datagram
	ringOffBeat        = 144 // u64, reader: +1 per poll
	ringOffReadRecords = 152 // u64, reader: records consumed
	ringFrame          = 4   // u32 record length before each record
)

// RingMagic opens a ring's header and the control datagrams about rings.
var RingMagic = [4]byte{'I', 'P', 'S', 'R'}

// Control datagrams share the receiver's socket with step datagrams.
const (
	// ControlSize is the size of a control datagram: magic, version,
	// kind, 2 reserved bytes, ring id.
	ControlSize     = 16
	ControlAnnounce = 1 // the memfd and the pipe's read end are attached
	ControlWake     = 2 // the reader marked the ring sleeping; a record is waiting
)

// Ring errors. ErrRingHeader refuses a ring; ErrRingIndex means the writer's
// index or a record frame is impossible, and the reader skips to the
// writer's position.
var (
	ErrRingHeader = errors.New("bad ring header")
	ErrRingIndex  = errors.New("impossible ring index or record length")
)

// RingHeader is a ring's fixed identity.
type RingHeader struct {
	Capacity uint32
	PID      uint32 // the writer's pid, in its own pid namespace
	ID       uint64 // random, chosen by the writer; the same ring announced twice has one id
}

// ParseRingHeader checks the fixed header of a ring mapped in mem (the
// whole file: header and records).
func ParseRingHeader(mem []byte) (RingHeader, error) {
	var h RingHeader
	if len(mem) < RingHeaderBytes {
		return h, fmt.Errorf("%w: %d bytes", ErrRingHeader, len(mem))
	}
	le := binary.LittleEndian
	switch {
	case [4]byte(mem[0:4]) != RingMagic:
		return h, fmt.Errorf("%w: magic", ErrRingHeader)
	case le.Uint16(mem[4:]) != RingVersion:
		return h, fmt.Errorf("%w: version %d", ErrRingHeader, le.Uint16(mem[4:]))
	case le.Uint32(mem[8:]) != RingHeaderBytes:
		return h, fmt.Errorf("%w: header size %d", ErrRingHeader, le.Uint32(mem[8:]))
	}
	h.Capacity = le.Uint32(mem[12:])
	h.PID = le.Uint32(mem[16:])
	h.ID = le.Uint64(mem[24:])
	c := uint64(h.Capacity)
	if c < RingMinCapacity || c > RingMaxCapacity || c&(c-1) != 0 {
		return h, fmt.Errorf("%w: capacity %d", ErrRingHeader, c)
	}
	if uint64(len(mem)) != RingHeaderBytes+c {
		return h, fmt.Errorf("%w: %d bytes for capacity %d", ErrRingHeader, len(mem), c)
	}
	return h, nil
}

// Ring reads records from a ring. It is not safe for concurrent use.
type Ring struct {
	Header RingHeader
	mem    []byte
	data   []byte
	mask   uint64
	// read and records are the reader's own copies: the shared ones are
	// written, never trusted.
	read, records uint64
	// lag makes the reader read only what was published by its previous
	// poll: on CPUs that reorder stores (arm64) the hook, in pure Python,
	// has no way to fence its record before its index, and a store waits
	// in a store buffer for nanoseconds, not a poll interval.
	lag       bool
	published uint64
}

// weakStores reports whether this CPU may make a writer's stores visible
// out of order (anything but x86's total store order).
var weakStores = runtime.GOARCH != "amd64" && runtime.GOARCH != "386" && runtime.GOARCH != "s390x"

// NewRing reads the ring in mem (which the caller keeps mapped while the Ring
// is used), going on from the read index a previous reader left there. A
// read index that cannot be right is replaced by the write index, and that
// is reported with ErrRingIndex together with the usable Ring.
func NewRing(mem []byte) (*Ring, error) {
	h, err := ParseRingHeader(mem)
	if err != nil {
		return nil, err
	}
	r := &Ring{Header: h, mem: mem, data: mem[RingHeaderBytes:], mask: uint64(h.Capacity) - 1, lag: weakStores}
	r.read = r.load(ringOffRead)
	r.records = r.load(ringOffReadRecords)
	w := r.load(ringOffWrite)
	r.published = r.read
	if w < r.read || w-r.read > uint64(h.Capacity) {
		r.skipTo(w)
		return r, fmt.Errorf("%w: read %d, write %d", ErrRingIndex, r.load(ringOffRead), w)
	}
	return r, nil
}

func (r *Ring) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

func (r *Ring) load(off int) uint64 { return atomic.LoadUint64(r.word(off)) }

func (r *Ring) store(off int, v uint64) { atomic.StoreUint64(r.word(off), v) }

// SetLag overrides whether the reader lags one poll behind the writer (see
// Ring); for tests.
func (r *Ring) SetLag(lag bool) { r.lag = lag }

// Unread returns the bytes published and not read yet.
func (r *Ring) Unread() uint64 { return r.load(ringOffWrite) - r.read }

// Read copies each record published since the last call into buf (at least
// MaxDatagram bytes) and calls fn with it, in order; fn must not keep the
// slice. With final set it reads everything written, lag or not: the
// writer has exited, so all its stores are visible. It returns the number
// of records read. On ErrRingIndex the reader has skipped to the writer's
// position; the records before the fault were handed to fn.
func (r *Ring) Read(buf []byte, final bool, fn func([]byte)) (int, error) {
	w := r.load(ringOffWrite)
	if w < r.read || w-r.read > uint64(r.Header.Capacity) {
		r.skipTo(w)
		return 0, fmt.Errorf("%w: write index %d, read %d", ErrRingIndex, w, r.read)
	}
	limit := w
	if r.lag && !final {
		limit, r.published = min(max(r.published, r.read), w), w
	}
	n := 0
	for r.read < limit {
		avail := limit - r.read
		if avail < ringFrame {
			r.skipTo(w)
			return n, fmt.Errorf("%w: %d bytes left for a frame", ErrRingIndex, avail)
		}
		var frame [ringFrame]byte
		r.copyOut(frame[:], r.read)
		size := uint64(binary.LittleEndian.Uint32(frame[:]))
		if size == 0 || size > MaxDatagram || size > uint64(len(buf)) || size > avail-ringFrame {
			r.skipTo(w)
			return n, fmt.Errorf("%w: record of %d bytes, %d available", ErrRingIndex, size, avail-ringFrame)
		}
		rec := buf[:size]
		r.copyOut(rec, r.read+ringFrame)
		r.read += ringFrame + size
		r.records++
		// Consumed before it is handled: a reader that dies in fn does not
		// hand the record over twice.
		r.store(ringOffRead, r.read)
		r.store(ringOffReadRecords, r.records)
		n++
		fn(rec)
	}
	return n, nil
}

// copyOut copies len(dst) bytes from ring position at, wrapping at the end.
func (r *Ring) copyOut(dst []byte, at uint64) {
	k := copy(dst, r.data[at&r.mask:])
	if k < len(dst) {
		copy(dst[k:], r.data)
	}
}

// skipTo drops everything up to w.
func (r *Ring) skipTo(w uint64) {
	r.read = w
	r.published = w
	r.store(ringOffRead, w)
}

// Beat tells the writer that a reader is polling the ring.
func (r *Ring) Beat() { r.store(ringOffBeat, r.load(ringOffBeat)+1) }

// Sleep marks the ring as read by a sleeping reader (gen odd: the writer
// sends one wake datagram with its next record) or an awake one (gen even).
// Marking it asleep returns false when records came in meanwhile: the
// reader must not sleep then. The store comes before the load, and Go's
// atomics are sequentially consistent, so a record published after the
// load sees the mark.
func (r *Ring) Sleep(gen uint64) bool {
	r.store(ringOffSleep, gen)
	return gen&1 == 0 || r.load(ringOffWrite) == r.read
}

// RingWriter writes records into a ring in memory, as the hook does; the
// hook is the real writer, this one serves tests, fuzz seeds and
// benchmarks in Go.
type RingWriter struct {
	mem  []byte
	mask uint64
	cap  uint64
	w    uint64
}

// NewRingWriter lays a fresh ring header over mem (RingHeaderBytes plus a
// power-of-two capacity) and returns a writer for it.
func NewRingWriter(mem []byte, id uint64, pid uint32) *RingWriter {
	c := uint64(len(mem) - RingHeaderBytes)
	clear(mem[:RingHeaderBytes])
	copy(mem, RingMagic[:])
	le := binary.LittleEndian
	le.PutUint16(mem[4:], RingVersion)
	le.PutUint32(mem[8:], RingHeaderBytes)
	le.PutUint32(mem[12:], uint32(c))
	le.PutUint32(mem[16:], pid)
	le.PutUint64(mem[24:], id)
	return &RingWriter{mem: mem, mask: c - 1, cap: c}
}

// Write appends one record (without its frame, which it adds) and
// publishes it; false when the ring has no room.
func (w *RingWriter) Write(rec []byte) bool {
	read := atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.mem[ringOffRead])))
	total := uint64(ringFrame + len(rec))
	if w.w+total-read > w.cap {
		return false
	}
	var frame [ringFrame]byte
	binary.LittleEndian.PutUint32(frame[:], uint32(len(rec)))
	w.put(frame[:], w.w)
	w.put(rec, w.w+ringFrame)
	w.w += total
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&w.mem[ringOffWrite])), w.w)
	return true
}

func (w *RingWriter) put(b []byte, at uint64) {
	data := w.mem[RingHeaderBytes:]
	k := copy(data[at&w.mask:], b)
	copy(data, b[k:])
}
