// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"encoding/binary"
	"math"
)

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
