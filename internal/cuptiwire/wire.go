// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package cuptiwire encodes and decodes the binary stream that the inferprof
// CUPTI injection library (native/cupti) writes to the cupti receiver. The
// format is specified in docs/cupti-wire.md; native/cupti/ipc_client.c is its
// C twin and the two are tested against each other.
package cuptiwire // import "github.com/inferprof/inferprof/internal/cuptiwire"

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Magic starts every frame: the bytes "IPCU" read as a little-endian uint32.
const Magic uint32 = 0x55435049

// Version is the only wire version this package speaks.
const Version uint8 = 1

// Sizes and limits. A frame longer than MaxPayload is bad input, so a
// corrupt length can never make the reader allocate without bound.
const (
	HeaderSize    = 12
	RecordSize    = 48 // version-1 records (frame type 3), and the prefix of every sized record
	Record2Size   = 56 // the sized records this package writes: v1 fields, then the graph node id
	MaxRecordSize = 256
	MaxPayload    = 1 << 20
	MaxStringLen  = 4096
	MaxStringID   = 1 << 16 // string ids are 1..MaxStringID-1
	MaxHostLen    = 255
	helloFixedLen = 4 + 4 + 8 + 2
	statsV1Len    = 3 * 8
	statsLen      = 6 * 8
	maxStatsLen   = 32 * 8
	livenessLen   = 48
	clockLen      = 24
	records2Pre   = 4 // u16 record size, u16 reserved
)

// FrameType says what a frame's payload holds.
type FrameType uint8

// Frame types.
const (
	FrameTypeHello    FrameType = 1 // first frame of a connection: who is talking
	FrameTypeString   FrameType = 2 // defines one interned string (a kernel name)
	FrameTypeRecords  FrameType = 3 // a packed array of 48-byte records
	FrameTypeStats    FrameType = 4 // the library's cumulative drop counters
	FrameTypeRecords2 FrameType = 5 // records with a size prefix: v1 fields first, newer fields after
	FrameTypeLiveness FrameType = 6 // whether CUPTI still delivers to the library
	FrameTypeClock    FrameType = 7 // the CUPTI-to-Unix clock offset and its error
)

// Frames of issue 13: who the process is (its engine instance and parent),
// which GPU each CUDA ordinal is, and the kernel and graph launches the
// library's callbacks saw, so the collector can tie kernels to the engine
// step that launched them. Older readers do not know these types; a reader
// that does skips bytes past the fields it knows, as for stats and clock.
const (
	FrameTypeIdentity FrameType = 8  // the process's service.instance.id, service.name and parent pid
	FrameTypeDevice   FrameType = 9  // a CUDA ordinal's GPU UUID
	FrameTypeLaunches FrameType = 10 // kernel and graph launches, by correlation id
)

// FrameTypeGraph carries the structural signature of an instantiated CUDA
// graph, so graph records (kind 5) can be summed per graph structure, as
// Graphsignal's cuda_graphs_nanoseconds profile is. The library sends it
// before the first graph record that uses its ids on each connection.
const FrameTypeGraph FrameType = 11

// Hello flags say how the library records.
const (
	HelloGraphMode   uint32 = 1 << 0 // kernels inside CUDA graphs come as whole-graph records only
	HelloRateLimited uint32 = 1 << 1 // token buckets drop some kernel records
	HelloDutyCycle   uint32 = 1 << 2 // activity is recorded only part of the time
	HelloMultiSub    uint32 = 1 << 3 // CUPTI multi-subscriber mode
	HelloLaunches    uint32 = 1 << 4 // launch records and marks follow (FrameTypeLaunches)
)

// Liveness state bits.
const (
	LiveEnabled   uint32 = 1 << 0 // the library's activity kinds are enabled
	LiveDisplaced uint32 = 1 << 1 // launches continue but no buffer reaches the library
	LiveDutyOff   uint32 = 1 << 2 // in the off part of the duty cycle
)

// Errors the decoder returns. Each one means the stream can no longer be
// trusted, so the receiver drops the connection.
var (
	ErrBadMagic       = errors.New("bad magic")
	ErrBadVersion     = errors.New("unsupported version")
	ErrFrameTooLarge  = errors.New("frame length over limit")
	ErrUnknownFrame   = errors.New("unknown frame type")
	ErrBadPayload     = errors.New("malformed payload")
	ErrUnknownRecord  = errors.New("unknown record kind")
	ErrUndefinedName  = errors.New("kernel name id never defined")
	ErrHelloMissing   = errors.New("first frame is not hello")
	ErrBadTimestamps  = errors.New("record ends before it starts")
	ErrStringIDBounds = errors.New("string id out of range")
)

// Header is a decoded frame header.
type Header struct {
	Version uint8
	Type    FrameType
	Flags   uint16
	Length  uint32
}

// ParseHeader decodes and checks a 12-byte frame header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("frame header: %w", ErrBadPayload)
	}
	if m := binary.LittleEndian.Uint32(b); m != Magic {
		return Header{}, fmt.Errorf("frame header magic %#08x: %w", m, ErrBadMagic)
	}
	h := Header{
		Version: b[4],
		Type:    FrameType(b[5]),
		Flags:   binary.LittleEndian.Uint16(b[6:]),
		Length:  binary.LittleEndian.Uint32(b[8:]),
	}
	if h.Version != Version {
		return h, fmt.Errorf("frame header version %d: %w", h.Version, ErrBadVersion)
	}
	if h.Length > MaxPayload {
		return h, fmt.Errorf("frame length %d > %d: %w", h.Length, MaxPayload, ErrFrameTooLarge)
	}
	if h.Type < FrameTypeHello || h.Type > FrameTypeGraph {
		return h, fmt.Errorf("frame type %d: %w", h.Type, ErrUnknownFrame)
	}
	return h, nil
}

// Hello identifies the process at the other end of a connection.
type Hello struct {
	PID         uint32
	Flags       uint32
	StartUnixNS uint64
	Host        []byte // valid only until the next frame
}

// ParseHello decodes a hello payload.
func ParseHello(p []byte) (Hello, error) {
	if len(p) < helloFixedLen {
		return Hello{}, fmt.Errorf("hello of %d bytes: %w", len(p), ErrBadPayload)
	}
	h := Hello{
		PID:         binary.LittleEndian.Uint32(p),
		Flags:       binary.LittleEndian.Uint32(p[4:]),
		StartUnixNS: binary.LittleEndian.Uint64(p[8:]),
	}
	n := int(binary.LittleEndian.Uint16(p[16:]))
	if n > MaxHostLen || len(p) != helloFixedLen+n {
		return Hello{}, fmt.Errorf("hello host length %d in %d bytes: %w", n, len(p), ErrBadPayload)
	}
	h.Host = p[helloFixedLen:]
	return h, nil
}

// ParseString decodes a string-definition payload. s aliases p.
func ParseString(p []byte) (id uint32, s []byte, err error) {
	if len(p) < 6 {
		return 0, nil, fmt.Errorf("string of %d bytes: %w", len(p), ErrBadPayload)
	}
	id = binary.LittleEndian.Uint32(p)
	n := int(binary.LittleEndian.Uint16(p[4:]))
	if id == 0 || id >= MaxStringID {
		return 0, nil, fmt.Errorf("string id %d: %w", id, ErrStringIDBounds)
	}
	if n > MaxStringLen || len(p) != 6+n {
		return 0, nil, fmt.Errorf("string length %d in %d bytes: %w", n, len(p), ErrBadPayload)
	}
	return id, p[6:], nil
}

// Stats are the library's cumulative counters since it loaded.
type Stats struct {
	DroppedRecords  uint64 // records the library dropped: collector absent or slow
	CUPTIDropped    uint64 // records CUPTI itself dropped for lack of buffers
	NamesOverflow   uint64 // kernels reported under the overflow name because the name table was full
	PoolExhausted   uint64 // buffer requests the library's pool could not serve
	OverflowDropped uint64 // records CUPTI wrote into the overflow buffer, dropped
	RateLimited     uint64 // kernel records the token buckets dropped
	LaunchesDropped uint64 // launch records the library lost: its queue was full, or no collector
	// GraphTableResets counts the times the library's table of graph
	// signatures (8192 graphs) filled and was cleared, as Graphsignal's is;
	// graphs instantiated before a reset go up as unknown.
	GraphTableResets uint64
}

// ParseStats decodes a stats payload: 24 bytes from older libraries, 48 or
// more (whole uint64s; fields this package does not know are skipped) now;
// each word past the sixth is read where the payload has it.
func ParseStats(p []byte) (Stats, error) {
	if len(p) != statsV1Len && (len(p) < statsLen || len(p) > maxStatsLen || len(p)%8 != 0) {
		return Stats{}, fmt.Errorf("stats of %d bytes: %w", len(p), ErrBadPayload)
	}
	s := Stats{
		DroppedRecords: binary.LittleEndian.Uint64(p),
		CUPTIDropped:   binary.LittleEndian.Uint64(p[8:]),
		NamesOverflow:  binary.LittleEndian.Uint64(p[16:]),
	}
	if len(p) >= statsLen {
		s.PoolExhausted = binary.LittleEndian.Uint64(p[24:])
		s.OverflowDropped = binary.LittleEndian.Uint64(p[32:])
		s.RateLimited = binary.LittleEndian.Uint64(p[40:])
	}
	if len(p) >= statsLen+8 {
		s.LaunchesDropped = binary.LittleEndian.Uint64(p[48:])
	}
	if len(p) >= statsLen+16 {
		s.GraphTableResets = binary.LittleEndian.Uint64(p[56:])
	}
	return s, nil
}

// Liveness tells a quiet engine from a stream another profiler took over.
type Liveness struct {
	LastBufferUnixNS uint64 // when CUPTI last completed a buffer to the library; 0 never
	Launches         uint64 // kernel and graph launches the library's callbacks saw
	BuffersCompleted uint64
	FreeBuffers      uint32
	TotalBuffers     uint32
	State            uint32 // Live* bits
	Resumes          uint32 // times the library took CUPTI back from another profiler
	CUPTIVersion     uint32 // cuptiGetVersion
}

// ParseLiveness decodes a liveness payload; a longer one from a newer
// library is read for the fields known here.
func ParseLiveness(p []byte) (Liveness, error) {
	if len(p) < livenessLen || len(p) > maxStatsLen {
		return Liveness{}, fmt.Errorf("liveness of %d bytes: %w", len(p), ErrBadPayload)
	}
	return Liveness{
		LastBufferUnixNS: binary.LittleEndian.Uint64(p),
		Launches:         binary.LittleEndian.Uint64(p[8:]),
		BuffersCompleted: binary.LittleEndian.Uint64(p[16:]),
		FreeBuffers:      binary.LittleEndian.Uint32(p[24:]),
		TotalBuffers:     binary.LittleEndian.Uint32(p[28:]),
		State:            binary.LittleEndian.Uint32(p[32:]),
		Resumes:          binary.LittleEndian.Uint32(p[36:]),
		CUPTIVersion:     binary.LittleEndian.Uint32(p[40:]),
	}, nil
}

// Clock is the offset the library maps CUPTI time to Unix time with:
// Unix = CUPTI + OffsetNS, known to within ErrorNS.
type Clock struct {
	OffsetNS      int64
	ErrorNS       uint64
	SampledUnixNS uint64
}

// ParseClock decodes a clock payload.
func ParseClock(p []byte) (Clock, error) {
	if len(p) < clockLen || len(p) > maxStatsLen {
		return Clock{}, fmt.Errorf("clock of %d bytes: %w", len(p), ErrBadPayload)
	}
	return Clock{
		OffsetNS:      int64(binary.LittleEndian.Uint64(p)),
		ErrorNS:       binary.LittleEndian.Uint64(p[8:]),
		SampledUnixNS: binary.LittleEndian.Uint64(p[16:]),
	}, nil
}

// AppendHeader appends a frame header.
func AppendHeader(dst []byte, t FrameType, length int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, Magic)
	dst = append(dst, Version, byte(t), 0, 0)
	return binary.LittleEndian.AppendUint32(dst, uint32(length))
}

// AppendHello appends a whole hello frame.
func AppendHello(dst []byte, pid uint32, startUnixNS uint64, host string) []byte {
	return AppendHelloFlags(dst, pid, 0, startUnixNS, host)
}

// AppendHelloFlags appends a whole hello frame with Hello* flags.
func AppendHelloFlags(dst []byte, pid, flags uint32, startUnixNS uint64, host string) []byte {
	if len(host) > MaxHostLen {
		host = host[:MaxHostLen]
	}
	dst = AppendHeader(dst, FrameTypeHello, helloFixedLen+len(host))
	dst = binary.LittleEndian.AppendUint32(dst, pid)
	dst = binary.LittleEndian.AppendUint32(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, startUnixNS)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(host)))
	return append(dst, host...)
}

// AppendString appends a whole string-definition frame.
func AppendString(dst []byte, id uint32, s string) []byte {
	if len(s) > MaxStringLen {
		s = s[:MaxStringLen]
	}
	dst = AppendHeader(dst, FrameTypeString, 6+len(s))
	dst = binary.LittleEndian.AppendUint32(dst, id)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// AppendStats appends a whole stats frame.
func AppendStats(dst []byte, s Stats) []byte {
	dst = AppendHeader(dst, FrameTypeStats, statsLen+16)
	for _, v := range [...]uint64{s.DroppedRecords, s.CUPTIDropped, s.NamesOverflow, s.PoolExhausted, s.OverflowDropped, s.RateLimited, s.LaunchesDropped, s.GraphTableResets} {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	return dst
}

// AppendStatsV1 appends the 24-byte stats frame older libraries send.
func AppendStatsV1(dst []byte, s Stats) []byte {
	dst = AppendHeader(dst, FrameTypeStats, statsV1Len)
	dst = binary.LittleEndian.AppendUint64(dst, s.DroppedRecords)
	dst = binary.LittleEndian.AppendUint64(dst, s.CUPTIDropped)
	return binary.LittleEndian.AppendUint64(dst, s.NamesOverflow)
}

// AppendLiveness appends a whole liveness frame.
func AppendLiveness(dst []byte, l Liveness) []byte {
	dst = AppendHeader(dst, FrameTypeLiveness, livenessLen)
	dst = binary.LittleEndian.AppendUint64(dst, l.LastBufferUnixNS)
	dst = binary.LittleEndian.AppendUint64(dst, l.Launches)
	dst = binary.LittleEndian.AppendUint64(dst, l.BuffersCompleted)
	for _, v := range [...]uint32{l.FreeBuffers, l.TotalBuffers, l.State, l.Resumes, l.CUPTIVersion, 0} {
		dst = binary.LittleEndian.AppendUint32(dst, v)
	}
	return dst
}

// AppendClock appends a whole clock frame.
func AppendClock(dst []byte, c Clock) []byte {
	dst = AppendHeader(dst, FrameTypeClock, clockLen)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.OffsetNS))
	dst = binary.LittleEndian.AppendUint64(dst, c.ErrorNS)
	return binary.LittleEndian.AppendUint64(dst, c.SampledUnixNS)
}
