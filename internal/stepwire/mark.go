// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A launch mark says when an executor worker process launched one batch's
// GPU work: vLLM's multiprocess executor runs the model in worker processes
// (one per GPU under tensor parallelism), which take each batch off a
// message queue when they get to it, so the engine process cannot time
// their launches. The hook in each worker counts the batches as the engine
// counts them (Step.Batch) and writes one mark per batch, from its
// execute_model call to the end of its sample_tokens call, into its own
// ring. See docs/step-wire.md.

// MarkVersion is the launch mark layout version.
const MarkVersion = 1

// MarkHeaderSize is the size of a launch mark's fixed header.
const MarkHeaderSize = 52

var markMagic = [4]byte{'I', 'P', 'L', 'W'}

// Mark flags.
const (
	// MarkFinal: no other mark of this batch follows from this process.
	MarkFinal uint16 = 1 << 0
)

// ErrMarkTimes is returned for a mark whose window ends before it starts.
var ErrMarkTimes = errors.New("launch mark ends before it starts")

// Mark is one decoded launch mark.
type Mark struct {
	Engine Engine
	Flags  uint16
	PID    uint32 // the worker process
	PPID   uint32 // its parent: the engine process
	// Batch is the batch number, counted from 1 as the engine counts it; 0
	// is a worker's hello (no window), sent when the hook attaches to the
	// worker, so the collector knows marks will come from it.
	Batch       uint64
	StartUnixNs int64
	EndUnixNs   int64
	ThreadID    uint32 // gettid of the thread that ran the call
	// ScheduledTokens is the batch's total_num_scheduled_tokens as the
	// worker saw it; the engine's step carries the same count, so a worker
	// whose count drifted can be told.
	ScheduledTokens uint32
	HookDropped     uint32 // marks this process dropped before this one (running count)
	Host            string
	InstanceID      string
}

// Final reports whether no other mark of this batch follows.
func (m *Mark) Final() bool { return m.Flags&MarkFinal != 0 }

// IsMark reports whether b is a launch mark rather than a step record.
func IsMark(b []byte) bool { return len(b) >= 4 && [4]byte(b[0:4]) == markMagic }

// DecodeMark parses b into m, reusing m's strings when unchanged.
func DecodeMark(b []byte, m *Mark) error {
	if len(b) > MaxDatagram {
		return ErrTooLarge
	}
	if len(b) < MarkHeaderSize {
		return fmt.Errorf("mark header: %w", ErrShort)
	}
	if [4]byte(b[0:4]) != markMagic {
		return ErrMagic
	}
	if b[4] != MarkVersion {
		return fmt.Errorf("%w %d (launch mark)", ErrVersion, b[4])
	}
	le := binary.LittleEndian
	m.Engine = Engine(b[5])
	m.Flags = le.Uint16(b[6:])
	if m.Flags&^MarkFinal != 0 {
		return fmt.Errorf("%w %#x", ErrFlags, m.Flags)
	}
	m.PID = le.Uint32(b[8:])
	m.PPID = le.Uint32(b[12:])
	m.Batch = le.Uint64(b[16:])
	m.StartUnixNs = int64(le.Uint64(b[24:]))
	m.EndUnixNs = int64(le.Uint64(b[32:]))
	m.ThreadID = le.Uint32(b[40:])
	m.ScheduledTokens = le.Uint32(b[44:])
	m.HookDropped = le.Uint32(b[48:])
	if m.EndUnixNs < m.StartUnixNs {
		return ErrMarkTimes
	}
	r := reader{b: b, off: MarkHeaderSize}
	r.short(&m.Host)
	r.short(&m.InstanceID)
	if r.err != nil {
		return r.err
	}
	if r.off != len(b) {
		return ErrTrailing
	}
	return nil
}

// EncodeMark writes m; the hook is the real encoder, this one serves tests
// and fuzz seeds.
func EncodeMark(m *Mark) []byte {
	le := binary.LittleEndian
	b := make([]byte, MarkHeaderSize, MarkHeaderSize+2+len(m.Host)+len(m.InstanceID))
	copy(b, markMagic[:])
	b[4] = MarkVersion
	b[5] = byte(m.Engine)
	le.PutUint16(b[6:], m.Flags)
	le.PutUint32(b[8:], m.PID)
	le.PutUint32(b[12:], m.PPID)
	le.PutUint64(b[16:], m.Batch)
	le.PutUint64(b[24:], uint64(m.StartUnixNs))
	le.PutUint64(b[32:], uint64(m.EndUnixNs))
	le.PutUint32(b[40:], m.ThreadID)
	le.PutUint32(b[44:], m.ScheduledTokens)
	le.PutUint32(b[48:], m.HookDropped)
	for _, v := range []string{m.Host, m.InstanceID} {
		b = append(b, byte(len(v)))
		b = append(b, v...)
	}
	return b
}
