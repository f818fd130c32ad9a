// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import "strconv"

// num reads a number and returns its bytes, valid until the next call. It
// checks the JSON number grammar.
func (s *scanner) num() ([]byte, error) {
	if s.peek() == 0 {
		return nil, s.fail("expected a number")
	}
	n := 0
	for {
		for s.pos+n < s.end {
			c := s.buf[s.pos+n]
			if (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E' {
				n++
				continue
			}
			goto done
		}
		if !s.fill() {
			break
		}
	}
done:
	b := s.buf[s.pos : s.pos+n]
	if !validNumber(b) {
		return nil, s.fail("bad number")
	}
	s.pos += n
	return b, nil
}

// validNumber reports whether b is a JSON number.
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i == len(b)
}

// parseInt parses a JSON integer; ok is false for anything else (a
// fraction, an exponent, or out of range).
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		v, err := strconv.ParseInt(string(b), 10, 64)
		return v, err == nil
	}
	neg := b[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	if i == len(b) {
		return 0, false
	}
	var v int64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}
