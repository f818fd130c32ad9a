// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire // import "github.com/inferprof/inferprof/internal/cuptiwire"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Handler receives a connection's decoded frames in order. Slices passed to
// it are reused by the decoder and are valid only during the call.
type Handler interface {
	Hello(h Hello) error
	String(id uint32, s []byte) error
	Records(recs []Record) error
	Stats(s Stats) error
	Liveness(l Liveness) error
	Clock(c Clock) error
}

// Decoder reads one connection's frame stream, checks it and hands the
// frames to a Handler. It keeps a fixed set of buffers: decoding allocates
// nothing once the largest frame seen so far fits.
type Decoder struct {
	r         io.Reader
	h         Handler
	ch        CorrelationHandler // h, when it takes the correlation frames; else nil
	gh        GraphHandler       // h, when it takes graph frames; else nil
	hdr       [HeaderSize]byte
	payload   []byte
	recs      []Record
	launchBuf []Launch
	defined   [MaxStringID / 64]uint64 // bitmap of string ids this connection defined
	hello     bool
	frames    uint64
}

// NewDecoder returns a decoder reading r. Wrap a socket in a bufio.Reader
// first: the decoder reads each header and payload with io.ReadFull.
func NewDecoder(r io.Reader, h Handler) *Decoder {
	ch, _ := h.(CorrelationHandler)
	gh, _ := h.(GraphHandler)
	return &Decoder{r: r, h: h, ch: ch, gh: gh}
}

// Reset starts a new stream on r, forgetting every string definition.
func (d *Decoder) Reset(r io.Reader) {
	d.r = r
	d.defined = [MaxStringID / 64]uint64{}
	d.hello = false
	d.frames = 0
}

// Frames returns how many frames were decoded so far.
func (d *Decoder) Frames() uint64 { return d.frames }

// Next decodes one frame. It returns io.EOF at a clean end of stream (between
// frames) and a wrapped io.ErrUnexpectedEOF for a stream cut inside a frame.
func (d *Decoder) Next() error {
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated frame header: %w", err)
		}
		return err
	}
	h, err := ParseHeader(d.hdr[:])
	if err != nil {
		return err
	}
	n := int(h.Length)
	if cap(d.payload) < n {
		d.payload = make([]byte, n)
	}
	p := d.payload[:n]
	if _, err := io.ReadFull(d.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated %d-byte frame: %w", n, io.ErrUnexpectedEOF)
		}
		return err
	}
	if err := d.frame(h.Type, p); err != nil {
		return err
	}
	d.frames++
	return nil
}

// Run decodes frames until the stream ends or fails. A clean end returns nil.
func (d *Decoder) Run() error {
	for {
		if err := d.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Frame decodes one frame whose header was already checked; it exists so
// that callers holding whole frames in memory (tests, fuzzing, benchmarks)
// skip the reader.
func (d *Decoder) frame(t FrameType, p []byte) error {
	if !d.hello && t != FrameTypeHello {
		return fmt.Errorf("frame type %d: %w", t, ErrHelloMissing)
	}
	switch t {
	case FrameTypeHello:
		if d.hello {
			return fmt.Errorf("second hello: %w", ErrBadPayload)
		}
		hl, err := ParseHello(p)
		if err != nil {
			return err
		}
		d.hello = true
		return d.h.Hello(hl)
	case FrameTypeString:
		id, s, err := ParseString(p)
		if err != nil {
			return err
		}
		d.defined[id/64] |= 1 << (id % 64)
		return d.h.String(id, s)
	case FrameTypeRecords:
		return d.records(p, RecordSize)
	case FrameTypeRecords2:
		if len(p) < records2Pre {
			return fmt.Errorf("sized records of %d bytes: %w", len(p), ErrBadPayload)
		}
		size := int(binary.LittleEndian.Uint16(p))
		if size < RecordSize || size > MaxRecordSize || size%8 != 0 {
			return fmt.Errorf("record size %d: %w", size, ErrBadPayload)
		}
		return d.records(p[records2Pre:], size)
	case FrameTypeLiveness:
		l, err := ParseLiveness(p)
		if err != nil {
			return err
		}
		return d.h.Liveness(l)
	case FrameTypeClock:
		c, err := ParseClock(p)
		if err != nil {
			return err
		}
		return d.h.Clock(c)
	case FrameTypeStats:
		st, err := ParseStats(p)
		if err != nil {
			return err
		}
		return d.h.Stats(st)
	case FrameTypeIdentity:
		id, err := ParseIdentity(p)
		if err != nil || d.ch == nil {
			return err
		}
		return d.ch.Identity(id)
	case FrameTypeDevice:
		dv, err := ParseDevice(p)
		if err != nil || d.ch == nil {
			return err
		}
		return d.ch.Device(dv)
	case FrameTypeLaunches:
		return d.launches(p)
	case FrameTypeGraph:
		g, err := ParseGraph(p)
		if err != nil || d.gh == nil {
			return err
		}
		return d.gh.Graph(g)
	}
	return fmt.Errorf("frame type %d: %w", t, ErrUnknownFrame)
}

// records decodes packed records of size bytes each; the first 48 bytes of
// each are the version-1 fields, a graph node id follows where size allows.
func (d *Decoder) records(p []byte, size int) error {
	if len(p)%size != 0 {
		return fmt.Errorf("records payload of %d bytes is not a multiple of %d: %w", len(p), size, ErrBadPayload)
	}
	n := len(p) / size
	if cap(d.recs) < n {
		d.recs = make([]Record, n)
	}
	recs := d.recs[:n]
	for i := range recs {
		b := p[i*size:]
		r := ParseRecord(b)
		if size >= Record2Size {
			r.GraphNode = binary.LittleEndian.Uint64(b[RecordSize:])
		}
		if r.Kind < RecordKindKernel || r.Kind > RecordKindGraph {
			return fmt.Errorf("record %d kind %d: %w", i, r.Kind, ErrUnknownRecord)
		}
		if r.End < r.Start {
			return fmt.Errorf("record %d start %d end %d: %w", i, r.Start, r.End, ErrBadTimestamps)
		}
		if r.Kind == RecordKindKernel {
			if r.Name == 0 || r.Name >= MaxStringID || d.defined[r.Name/64]&(1<<(r.Name%64)) == 0 {
				return fmt.Errorf("record %d name id %d: %w", i, r.Name, ErrUndefinedName)
			}
		}
		recs[i] = r
	}
	return d.h.Records(recs)
}

// launches decodes a launches payload: a u16 record size, a u16 reserved,
// then records of that size whose first 24 bytes are Launch's fields.
func (d *Decoder) launches(p []byte) error {
	if len(p) < records2Pre {
		return fmt.Errorf("launches of %d bytes: %w", len(p), ErrBadPayload)
	}
	size := int(binary.LittleEndian.Uint16(p))
	if size < minLaunchSize || size > MaxRecordSize || size%8 != 0 {
		return fmt.Errorf("launch record size %d: %w", size, ErrBadPayload)
	}
	p = p[records2Pre:]
	if len(p)%size != 0 {
		return fmt.Errorf("launches payload of %d bytes is not a multiple of %d: %w", len(p), size, ErrBadPayload)
	}
	n := len(p) / size
	if cap(d.launchBuf) < n {
		d.launchBuf = make([]Launch, n)
	}
	ls := d.launchBuf[:n]
	for i := range ls {
		l := ParseLaunch(p[i*size:])
		if l.Kind < LaunchKindKernel || l.Kind > LaunchKindMark {
			return fmt.Errorf("launch %d kind %d: %w", i, l.Kind, ErrUnknownRecord)
		}
		ls[i] = l
	}
	if d.ch == nil {
		return nil
	}
	return d.ch.Launches(ls)
}
