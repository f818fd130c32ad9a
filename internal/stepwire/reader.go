// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

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
