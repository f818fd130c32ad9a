// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// str reads a string and returns its raw bytes (escapes not decoded) and
// whether it held escapes. The slice is valid until the next call.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	if s.peek() != '"' {
		return nil, false, s.fail("expected a string")
	}
	s.pos++
	// Keys and most values are short: look at a few bytes before paying
	// for IndexByte.
	for i := 0; i < 16 && s.pos+i < s.end; i++ {
		c := s.buf[s.pos+i]
		if c == '"' {
			raw = s.buf[s.pos : s.pos+i]
			s.pos += i + 1
			return raw, false, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	i := 0 // scanned bytes after the opening quote
	for {
		seg := s.buf[s.pos+i : s.end]
		q := bytes.IndexByte(seg, '"')
		lim := len(seg)
		if q >= 0 {
			lim = q
		}
		if b := bytes.IndexByte(seg[:lim], '\\'); b >= 0 {
			escaped = true
			i += b + 2 // the escaped byte is never the end, whatever it is
			for s.pos+i > s.end {
				if !s.fill() {
					return nil, false, s.fail("unterminated string")
				}
			}
			continue
		}
		if q >= 0 {
			raw = s.buf[s.pos : s.pos+i+q]
			for _, c := range raw {
				if c < 0x20 {
					return nil, false, s.fail("control character in string")
				}
			}
			s.pos += i + q + 1
			return raw, escaped, nil
		}
		i += len(seg)
		if !s.fill() {
			return nil, false, s.fail("unterminated string")
		}
	}
}

// text reads a string and returns its decoded bytes, valid until the next
// call.
func (s *scanner) text() ([]byte, error) {
	raw, esc, err := s.str()
	if err != nil || !esc {
		return raw, err
	}
	s.tmp, err = unescape(s.tmp[:0], raw)
	if err != nil {
		return nil, fmt.Errorf("%w at offset %d: %w", err, s.off+int64(s.pos), ErrSyntax)
	}
	return s.tmp, nil
}

// unescape appends the decoded form of a JSON string body to dst.
func unescape(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return dst, errors.New("bad escape")
		}
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok {
				return dst, errors.New("bad \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(raw[min(i+3, len(raw)):]); ok && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, errors.New("bad escape")
		}
	}
	return dst, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// key reads an object key and the colon after it.
func (s *scanner) key() error {
	if _, _, err := s.str(); err != nil {
		return err
	}
	return s.expect(':')
}
