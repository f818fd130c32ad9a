// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Decode parses b into s, reusing s's slices and identity strings. It
// allocates one string per request id; a Decoder interns them instead.
func Decode(b []byte, s *Step) error {
	return decode(b, s, nil)
}

// Decode parses b into s.
func (d *Decoder) Decode(b []byte, s *Step) error { return decode(b, s, d) }

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
