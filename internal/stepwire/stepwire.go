// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepwire decodes engine step records, the wire format the Python
// hook (integrations/python/inferprof_hook/wire.py) writes once per scheduler
// step, and the shared-memory ring that carries them (ring.go). The format
// is specified in docs/step-wire.md.
package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Version is the wire format version the hook sends and Encode writes by
// default. Decode also reads every older version down to MinVersion, so a
// collector upgraded before its engines keeps their steps.
const Version = 4

// MinVersion is the oldest wire format version Decode reads.
const MinVersion = 1

// Header sizes per version: version 2 added hook_evicted_ids and n_resumed;
// version 3 has version 2's header and a fourth identity string; version 4
// adds the batch number and the count of launch windows.
const (
	HeaderSizeV1 = 72
	HeaderSizeV2 = 78
	HeaderSizeV3 = HeaderSizeV2
	HeaderSizeV4 = 88
)

// HeaderSize is the size of the current version's fixed header in bytes.
const HeaderSize = HeaderSizeV4

// WindowSize is the size of one launch window on the wire (version 4).
const WindowSize = 20

// MaxWindows bounds the launch windows of one step; the hook sends at most
// a handful (vLLM: one, from the batch's schedule() to the next schedule()
// or update; SGLang: preparation, launch, delayed sampling, result
// processing, and the forward thread's iteration in older releases).
const MaxWindows = 16

// MaxDatagram bounds a datagram; the hook never sends more than 200 KiB.
const MaxDatagram = 256 << 10

var magic = [4]byte{'I', 'P', 'S', 'T'}

// Header flags.
const (
	FlagIDsTruncated uint16 = 1 << 0 // the hook left out request ids to stay under its size limit
	FlagKVUsage      uint16 = 1 << 1 // KVUsage holds a value
	FlagDegraded     uint16 = 1 << 2 // version 2: the engine lacked something the hook reads; see the engine's log
)

// layout is what distinguishes one wire version from another.
type layout struct {
	header     int    // fixed header size
	flags      uint16 // flags the version defines
	evictedIDs bool   // header carries hook_evicted_ids
	resumed    bool   // header carries n_resumed; resumed ids follow preempted ids
	instanceID bool   // the identity block ends with service.instance.id
	windows    bool   // header carries the batch number and n_windows; windows follow the resumed ids
}

var layouts = [Version + 1]layout{
	1: {header: HeaderSizeV1, flags: FlagIDsTruncated | FlagKVUsage},
	2: {header: HeaderSizeV2, flags: FlagIDsTruncated | FlagKVUsage | FlagDegraded, evictedIDs: true, resumed: true},
	3: {header: HeaderSizeV3, flags: FlagIDsTruncated | FlagKVUsage | FlagDegraded, evictedIDs: true, resumed: true, instanceID: true},
	4: {header: HeaderSizeV4, flags: FlagIDsTruncated | FlagKVUsage | FlagDegraded, evictedIDs: true, resumed: true, instanceID: true, windows: true},
}

// Engine names the engine that sent a step.
type Engine uint8

// Engines.
const (
	EngineUnknown Engine = 0
	EngineVLLM    Engine = 1
	EngineSGLang  Engine = 2
)

// String returns the engine's name as used in gen_ai.provider.name.
func (e Engine) String() string {
	switch e {
	case EngineVLLM:
		return "vllm"
	case EngineSGLang:
		return "sglang"
	default:
		return "unknown"
	}
}

// Errors returned by Decode; every one means the datagram is dropped.
var (
	ErrShort     = errors.New("datagram shorter than its contents")
	ErrMagic     = errors.New("not an engine step datagram (bad magic)")
	ErrVersion   = errors.New("unsupported wire format version")
	ErrTrailing  = errors.New("trailing bytes after the last field")
	ErrFlags     = errors.New("unknown flags")
	ErrTimes     = errors.New("step ends before it starts")
	ErrKVUsage   = errors.New("kv cache usage outside 0..1")
	ErrUTF8      = errors.New("string is not valid UTF-8")
	ErrTooLarge  = errors.New("datagram larger than the maximum")
	ErrZeroIndex = errors.New("step index 0 (steps count from 1)")
	ErrWindows   = errors.New("more launch windows than allowed")
	ErrWindow    = errors.New("launch window ends before it starts")
)

// Step is one decoded scheduler step. Decode reuses its slices.
type Step struct {
	// Version is the wire format version the step came in (Encode writes
	// it; zero means Version).
	Version     uint8
	Engine      Engine
	Flags       uint16
	PID         uint32
	EngineIndex uint32 // data-parallel rank of the engine in its server
	Index       uint64 // step number in its process, from 1
	StartUnixNs int64
	EndUnixNs   int64

	PrefillRequests uint32
	DecodeRequests  uint32
	ScheduledTokens uint32
	Running         uint32
	Waiting         uint32
	KVUsage         float32 // fraction 0..1, meaningful when Flags has FlagKVUsage
	HookDropped     uint32  // datagrams the hook process dropped before this one
	// HookEvictedIDs counts request ids the hook process evicted from its
	// id table at its limit (version 2; running count). Such a request may
	// be reported under the engine's internal id.
	HookEvictedIDs uint32

	ServiceName   string
	EngineVersion string
	Host          string
	// InstanceID is the service.instance.id the engine process found in
	// OTEL_RESOURCE_ATTRIBUTES (version 3; inferprof-run sets it), the
	// same as the engine's request spans carry. Empty without one.
	InstanceID string

	// RequestIDs got RequestTokens[i] tokens each in this step.
	RequestIDs    []string
	RequestTokens []int64
	Preempted     []string
	// Resumed lists requests that came back from preemption in this step
	// (version 2).
	Resumed []string

	// Batch numbers the step's batch among the batches its engine handed
	// the model executor, from 1 (version 4; 0 when the hook could not
	// count them). The engine's executor workers count the same calls, so
	// their launch marks (Mark) name the same number.
	Batch uint64
	// Windows are the intervals in which the engine process launched the
	// batch's GPU work (version 4, on the wire right after the identity;
	// empty when the hook could not see the launching calls): vLLM's
	// execute_model and sample_tokens, from the batch's schedule() call to
	// the next schedule() or update end; SGLang's preparation, run_batch
	// and delayed sampling of the batch and the processing of its result.
	// Under async scheduling they are not the step's time range: the next
	// batch launches inside that range.
	Windows []Window
}

// Window is one interval of a batch's launches, on one thread.
type Window struct {
	StartUnixNs, EndUnixNs int64
	// ThreadID is the Linux thread id (gettid) that ran the launching call;
	// 0 when any thread counts.
	ThreadID uint32
}

// FallbackInstanceID is the service.instance.id of a step whose hook found
// none in OTEL_RESOURCE_ATTRIBUTES: "host/pid/engine_index". It names the
// engine process, not the server whose request spans the step serves, so
// the step window does not key on it (see internal/stepwindow).
func FallbackInstanceID(host string, pid, engineIndex uint32) string {
	return host + "/" + strconv.FormatUint(uint64(pid), 10) + "/" + strconv.FormatUint(uint64(engineIndex), 10)
}

// KVUsageKnown reports whether the hook could read the KV cache usage.
func (s *Step) KVUsageKnown() bool { return s.Flags&FlagKVUsage != 0 }

// IDsTruncated reports whether the hook left out request ids.
func (s *Step) IDsTruncated() bool { return s.Flags&FlagIDsTruncated != 0 }

// Degraded reports whether the hook found the engine lacking something it
// reads, so some fields are estimates or absent.
func (s *Step) Degraded() bool { return s.Flags&FlagDegraded != 0 }

// Decode parses b into s, reusing s's slices and identity strings. It
// allocates one string per request id; a Decoder interns them instead.
func Decode(b []byte, s *Step) error {
	return decode(b, s, nil)
}

// maxInterned bounds a Decoder's id table; reaching it starts the table over.
const maxInterned = 1 << 16

// Decoder decodes datagrams like Decode but keeps the request ids it has
// seen, so the ids of running requests, which repeat every step, cost no
// allocation. A Decoder is not safe for concurrent use.
type Decoder struct {
	ids    map[string]string
	resets uint64
}

// NewDecoder returns a Decoder with an empty id table.
func NewDecoder() *Decoder { return &Decoder{ids: make(map[string]string)} }

// Decode parses b into s.
func (d *Decoder) Decode(b []byte, s *Step) error { return decode(b, s, d) }

// Resets returns how often the id table reached its limit and started over.
func (d *Decoder) Resets() uint64 { return d.resets }

func (d *Decoder) intern(b []byte) string {
	if v, ok := d.ids[string(b)]; ok {
		return v
	}
	if len(d.ids) >= maxInterned {
		// A cache: starting over costs allocations, never correctness.
		clear(d.ids)
		d.resets++
	}
	v := string(b)
	d.ids[v] = v
	return v
}

func decode(b []byte, s *Step, d *Decoder) error {
	if len(b) > MaxDatagram {
		return ErrTooLarge
	}
	if len(b) < HeaderSizeV1 {
		return fmt.Errorf("header: %w", ErrShort)
	}
	if [4]byte(b[0:4]) != magic {
		return ErrMagic
	}
	v := b[4]
	if v < MinVersion || v > Version {
		return fmt.Errorf("%w %d", ErrVersion, v)
	}
	l := &layouts[v]
	if len(b) < l.header {
		return fmt.Errorf("header: %w", ErrShort)
	}
	le := binary.LittleEndian
	s.Version = v
	s.Engine = Engine(b[5])
	s.Flags = le.Uint16(b[6:])
	if s.Flags&^l.flags != 0 {
		return fmt.Errorf("%w %#x", ErrFlags, s.Flags)
	}
	s.PID = le.Uint32(b[8:])
	s.EngineIndex = le.Uint32(b[12:])
	s.Index = le.Uint64(b[16:])
	s.StartUnixNs = int64(le.Uint64(b[24:]))
	s.EndUnixNs = int64(le.Uint64(b[32:]))
	s.PrefillRequests = le.Uint32(b[40:])
	s.DecodeRequests = le.Uint32(b[44:])
	s.ScheduledTokens = le.Uint32(b[48:])
	s.Running = le.Uint32(b[52:])
	s.Waiting = le.Uint32(b[56:])
	s.KVUsage = math.Float32frombits(le.Uint32(b[60:]))
	s.HookDropped = le.Uint32(b[64:])
	off := 68
	s.HookEvictedIDs = 0
	if l.evictedIDs {
		s.HookEvictedIDs = le.Uint32(b[off:])
		off += 4
	}
	nTok := int(le.Uint16(b[off:]))
	nPre := int(le.Uint16(b[off+2:]))
	nRes := 0
	if l.resumed {
		nRes = int(le.Uint16(b[off+4:]))
	}
	nWin := 0
	s.Batch = 0
	if l.windows {
		s.Batch = le.Uint64(b[78:])
		nWin = int(le.Uint16(b[86:]))
		if nWin > MaxWindows {
			return fmt.Errorf("%w: %d", ErrWindows, nWin)
		}
	}
	if s.Index == 0 {
		return ErrZeroIndex
	}
	if s.EndUnixNs < s.StartUnixNs {
		return ErrTimes
	}
	if s.KVUsageKnown() && !(s.KVUsage >= 0 && s.KVUsage <= 1) {
		return ErrKVUsage
	}
	r := reader{b: b, off: l.header, d: d}
	r.short(&s.ServiceName)
	r.short(&s.EngineVersion)
	r.short(&s.Host)
	if l.instanceID {
		r.short(&s.InstanceID)
	} else {
		s.InstanceID = ""
	}
	// Version 4: the launch windows, fixed-size, before the variable lists.
	s.Windows = s.Windows[:0]
	for range nWin {
		w, ok := r.window()
		if !ok {
			break
		}
		s.Windows = append(s.Windows, w)
	}
	s.RequestIDs = s.RequestIDs[:0]
	s.RequestTokens = s.RequestTokens[:0]
	s.Preempted = s.Preempted[:0]
	s.Resumed = s.Resumed[:0]
	for range nTok {
		tok := r.u16()
		id := r.long()
		if r.err != nil {
			break
		}
		s.RequestTokens = append(s.RequestTokens, int64(tok))
		s.RequestIDs = append(s.RequestIDs, id)
	}
	s.Preempted = r.ids(s.Preempted, nPre)
	s.Resumed = r.ids(s.Resumed, nRes)
	if r.err != nil {
		return r.err
	}
	if r.off != len(b) {
		return ErrTrailing
	}
	return nil
}

// reader walks the variable part; the first error sticks.
type reader struct {
	b   []byte
	off int
	err error
	d   *Decoder // interns ids when set
}

func (r *reader) u16() uint16 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 2 {
		r.err = fmt.Errorf("length: %w", ErrShort)
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b)-r.off < n {
		r.err = fmt.Errorf("string: %w", ErrShort)
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	if !utf8.Valid(v) {
		r.err = ErrUTF8
		return nil
	}
	return v
}

// short reads a u8-length string into *dst, keeping the old string (no
// allocation) when the bytes are the same, as identity strings always are.
func (r *reader) short(dst *string) {
	if r.err != nil {
		return
	}
	if r.off >= len(r.b) {
		r.err = fmt.Errorf("identity: %w", ErrShort)
		return
	}
	n := int(r.b[r.off])
	r.off++
	v := r.bytes(n)
	if r.err == nil && *dst != string(v) {
		*dst = string(v)
	}
}

func (r *reader) long() string {
	n := int(r.u16())
	v := r.bytes(n)
	if r.d != nil && r.err == nil {
		return r.d.intern(v)
	}
	return string(v)
}

// window reads one launch window.
func (r *reader) window() (Window, bool) {
	if r.err != nil {
		return Window{}, false
	}
	if len(r.b)-r.off < WindowSize {
		r.err = fmt.Errorf("window: %w", ErrShort)
		return Window{}, false
	}
	le := binary.LittleEndian
	w := Window{
		StartUnixNs: int64(le.Uint64(r.b[r.off:])),
		EndUnixNs:   int64(le.Uint64(r.b[r.off+8:])),
		ThreadID:    le.Uint32(r.b[r.off+16:]),
	}
	r.off += WindowSize
	if w.EndUnixNs < w.StartUnixNs {
		r.err = ErrWindow
		return Window{}, false
	}
	return w, true
}

// ids appends n length-prefixed ids to dst.
func (r *reader) ids(dst []string, n int) []string {
	for range n {
		id := r.long()
		if r.err != nil {
			break
		}
		dst = append(dst, id)
	}
	return dst
}

// Encode writes s in wire format s.Version (zero: Version). The hook is the
// real encoder; this one serves tests, fuzz seeds and benchmarks in Go.
// Identity strings longer than 255 bytes, more than 65535 ids, and fields a
// version lacks (resumed ids and evicted ids before version 2, the instance
// id before version 3, the batch and its windows before version 4) are not
// representable.
func Encode(s *Step) []byte {
	v := s.Version
	if v == 0 {
		v = Version
	}
	l := &layouts[min(int(v), Version)]
	le := binary.LittleEndian
	b := make([]byte, l.header, l.header+64)
	copy(b, magic[:])
	b[4] = v
	b[5] = byte(s.Engine)
	le.PutUint16(b[6:], s.Flags)
	le.PutUint32(b[8:], s.PID)
	le.PutUint32(b[12:], s.EngineIndex)
	le.PutUint64(b[16:], s.Index)
	le.PutUint64(b[24:], uint64(s.StartUnixNs))
	le.PutUint64(b[32:], uint64(s.EndUnixNs))
	le.PutUint32(b[40:], s.PrefillRequests)
	le.PutUint32(b[44:], s.DecodeRequests)
	le.PutUint32(b[48:], s.ScheduledTokens)
	le.PutUint32(b[52:], s.Running)
	le.PutUint32(b[56:], s.Waiting)
	le.PutUint32(b[60:], math.Float32bits(s.KVUsage))
	le.PutUint32(b[64:], s.HookDropped)
	off := 68
	if l.evictedIDs {
		le.PutUint32(b[off:], s.HookEvictedIDs)
		off += 4
	}
	le.PutUint16(b[off:], uint16(len(s.RequestIDs)))
	le.PutUint16(b[off+2:], uint16(len(s.Preempted)))
	if l.resumed {
		le.PutUint16(b[off+4:], uint16(len(s.Resumed)))
	}
	if l.windows {
		le.PutUint64(b[78:], s.Batch)
		le.PutUint16(b[86:], uint16(len(s.Windows)))
	}
	ident := []string{s.ServiceName, s.EngineVersion, s.Host}
	if l.instanceID {
		ident = append(ident, s.InstanceID)
	}
	for _, v := range ident {
		b = append(b, byte(len(v)))
		b = append(b, v...)
	}
	if l.windows {
		for _, w := range s.Windows {
			b = le.AppendUint64(b, uint64(w.StartUnixNs))
			b = le.AppendUint64(b, uint64(w.EndUnixNs))
			b = le.AppendUint32(b, w.ThreadID)
		}
	}
	for i, id := range s.RequestIDs {
		b = le.AppendUint16(b, uint16(s.RequestTokens[i]))
		b = le.AppendUint16(b, uint16(len(id)))
		b = append(b, id...)
	}
	for _, id := range s.Preempted {
		b = le.AppendUint16(b, uint16(len(id)))
		b = append(b, id...)
	}
	if l.resumed {
		for _, id := range s.Resumed {
			b = le.AppendUint16(b, uint16(len(id)))
			b = append(b, id...)
		}
	}
	return b
}
