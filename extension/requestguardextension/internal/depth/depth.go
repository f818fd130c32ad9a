// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package depth measures how deep a protobuf or JSON body nests, without
// recursion and without decoding it, so that a body too deep for pdata's
// recursive decoders is refused before they see it.
package depth // import "github.com/inferprof/inferprof/extension/requestguardextension/internal/depth"

import (
	"errors"
	"fmt"
)

// ErrTooDeep is returned for a body that nests deeper than the limit.
var ErrTooDeep = errors.New("body nests too deep")

func tooDeep(limit int) error {
	return fmt.Errorf("%w: more than %d levels of nested messages (max_depth)", ErrTooDeep, limit)
}

// Proto returns ErrTooDeep when b, read as protobuf wire bytes, nests
// messages more than limit levels below the top-level message.
//
// It needs no schema: every length-delimited field is taken for a message
// while its bytes parse as one, and for a string or bytes field from the
// first byte that does not. A string can only add depth where its bytes are
// themselves valid, nested protobuf, which a sender has to build on purpose.
// Each byte is read once; the stack holds at most limit+1 ends.
// A body that is not valid protobuf at the top level is left to the decoder
// to refuse, with its own error.
func Proto(b []byte, limit int) error {
	ends := make([]int, 1, 16)
	ends[0] = len(b)
	pos := 0
	for {
		end := ends[len(ends)-1]
		if pos == end {
			if len(ends) == 1 {
				return nil
			}
			if len(ends) > limit+1 {
				return tooDeep(limit)
			}
			ends = ends[:len(ends)-1]
			continue
		}
		next, child, ok := field(b[:end], pos)
		if !ok {
			if len(ends) == 1 {
				return nil
			}
			// Not a message after all: the parent holds it as bytes.
			pos = end
			ends = ends[:len(ends)-1]
			continue
		}
		pos = next
		switch {
		case child <= pos: // not length-delimited, or empty
		case len(ends) > limit+1:
			// In a frame one level past the limit: whether it is a message
			// decides, its fields' contents do not.
			pos = child
		default:
			ends = append(ends, child)
		}
	}
}

// field reads one field at pos. For a length-delimited field it returns the
// position of its contents as next and their end as child; otherwise child
// is 0 and next is the position after the field.
func field(b []byte, pos int) (next, child int, ok bool) {
	tag, pos, ok := varint(b, pos)
	if !ok || tag>>3 == 0 {
		return 0, 0, false
	}
	switch tag & 7 {
	case 0:
		_, pos, ok = varint(b, pos)
		return pos, 0, ok
	case 1:
		return pos + 8, 0, pos+8 <= len(b)
	case 5:
		return pos + 4, 0, pos+4 <= len(b)
	case 2:
		n, pos, ok := varint(b, pos)
		if !ok || n > uint64(len(b)-pos) {
			return 0, 0, false
		}
		return pos, pos + int(n), true
	default: // groups (3, 4) are not in OTLP; 6 and 7 are not wire types
		return 0, 0, false
	}
}

func varint(b []byte, pos int) (uint64, int, bool) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if pos >= len(b) {
			return 0, 0, false
		}
		c := b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos, true
		}
	}
	return 0, 0, false
}

// JSON returns ErrTooDeep when b, read as JSON, nests objects more than
// limit levels below the top-level object, or objects and arrays together
// more than twice that. OTLP/JSON writes each protobuf message as an object,
// so the first bound refuses the same requests Proto refuses in their
// protobuf encoding; the second bounds arrays nested in arrays, which OTLP
// does not have but a decoder skipping an unknown field still walks.
// The scan stops at the first bracket that closes the wrong kind, where any
// JSON decoder stops too.
func JSON(b []byte, limit int) error {
	var (
		stack   []byte // open brackets, at most 2*limit+2
		objects int
		inStr   bool
	)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			if c == '{' {
				objects++
			}
			stack = append(stack, c)
			if objects > limit+1 || len(stack) > 2*limit+2 {
				return tooDeep(limit)
			}
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
				return nil
			}
			if c == '}' {
				objects--
			}
			stack = stack[:len(stack)-1]
		}
	}
	return nil
}
