// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// readSize is how much the scanner asks the reader for at a time.
const readSize = 256 << 10

// MaxToken bounds one JSON string or number, and so the scanner's buffer: a
// kernel name longer than this makes the file invalid rather than the heap
// unbounded.
const MaxToken = 4 << 20

// ErrSyntax means the input is not well-formed JSON where the reader looked.
var ErrSyntax = errors.New("JSON syntax error")

// scanner is a pull tokenizer over a byte stream that keeps only a window
// of the input: tokens are slices of its buffer, valid until the next call.
// It checks the syntax of what it skips, so a file that is not JSON is
// refused as encoding/json would refuse it.
type scanner struct {
	r   io.Reader
	buf []byte
	pos int   // next unread byte
	end int   // bytes valid in buf
	off int64 // input offset of buf[0], for errors
	eof bool
	err error
	tmp []byte // unescaped strings
	// closers is skipNested's stack of expected closing brackets.
	closers []byte
}

func newScanner(r io.Reader) *scanner {
	return &scanner{r: r, buf: make([]byte, readSize)}
}

// fill reads more input, keeping buf[pos:end] (moved to the front). It
// returns false at the end of the input or on a read error.
func (s *scanner) fill() bool {
	if s.eof {
		return false
	}
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:s.end])
		s.off += int64(s.pos)
		s.pos, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= MaxToken+readSize {
			s.err = fmt.Errorf("token at offset %d longer than %d bytes: %w", s.off, MaxToken, ErrSyntax)
			s.eof = true
			return false
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.eof = true
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// fail returns the error that explains why a token could not be read.
func (s *scanner) fail(what string) error {
	if s.err != nil {
		return s.err
	}
	if s.pos >= s.end && s.eof {
		return fmt.Errorf("%s at offset %d: %w", what, s.off+int64(s.pos), io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%s at offset %d: %w", what, s.off+int64(s.pos), ErrSyntax)
}

// space marks JSON white space.
var space = [256]bool{' ': true, '\n': true, '\r': true, '\t': true}

// peek skips white space and returns the next byte without taking it; 0 at
// the end of the input.
func (s *scanner) peek() byte {
	if s.pos < s.end {
		if c := s.buf[s.pos]; !space[c] {
			return c
		}
	}
	return s.peekSlow()
}

// peekSlow is peek past white space; Kineto indents its output, so most
// tokens follow a few spaces.
func (s *scanner) peekSlow() byte {
	for {
		for s.pos < s.end {
			if c := s.buf[s.pos]; !space[c] {
				return c
			}
			s.pos++
		}
		if !s.fill() {
			return 0
		}
	}
}

// expect takes the next non-space byte, which must be c.
func (s *scanner) expect(c byte) error {
	if s.pos < s.end && s.buf[s.pos] == c {
		s.pos++
		return nil
	}
	if s.peekSlow() != c {
		return s.fail(fmt.Sprintf("expected %q", c))
	}
	s.pos++
	return nil
}

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

// literal reads true, false or null.
func (s *scanner) literal() error {
	for _, lit := range [...]string{"true", "false", "null"} {
		if s.peek() != lit[0] {
			continue
		}
		for s.end-s.pos < len(lit) && s.fill() {
		}
		if s.end-s.pos >= len(lit) && string(s.buf[s.pos:s.pos+len(lit)]) == lit {
			s.pos += len(lit)
			return nil
		}
		break
	}
	return s.fail("bad literal")
}

// maxDepth bounds nesting, so hostile input cannot make skip slow or deep.
const maxDepth = 1000

// skip reads and discards one value of any type, checking its syntax.
func (s *scanner) skip() error {
	switch s.peek() {
	case '"':
		_, _, err := s.str()
		return err
	case '{', '[':
		return s.skipNested()
	case 't', 'f', 'n':
		return s.literal()
	}
	_, err := s.num()
	return err
}

// skipNested skips an object or array.
func (s *scanner) skipNested() error {
	depth := 0
	// closers holds the bracket each open level expects; nesting is
	// bounded by maxDepth.
	if s.closers == nil {
		s.closers = make([]byte, maxDepth)
	}
	closers := s.closers
	for {
		switch c := s.peek(); c {
		case '{', '[':
			if depth == maxDepth {
				return s.fail("nesting too deep")
			}
			s.pos++
			if c == '{' {
				closers[depth] = '}'
			} else {
				closers[depth] = ']'
			}
			depth++
			if s.peek() == closers[depth-1] {
				s.pos++
				depth--
				break
			}
			if c == '{' {
				if err := s.key(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if _, _, err := s.str(); err != nil {
				return err
			}
		case 't', 'f', 'n':
			if err := s.literal(); err != nil {
				return err
			}
		default:
			if _, err := s.num(); err != nil {
				return err
			}
		}
		// After a value: close levels, or go on to the next member.
		for depth > 0 {
			c := s.peek()
			if c == ',' {
				s.pos++
				if closers[depth-1] == '}' {
					if err := s.key(); err != nil {
						return err
					}
				}
				break
			}
			if c != closers[depth-1] {
				return s.fail("expected , or a closing bracket")
			}
			s.pos++
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// class sorts bytes for skipRest: 1 quote, 2 opening and 3 closing brackets.
var class = [256]uint8{'"': 1, '{': 2, '[': 2, '}': 3, ']': 3}

// skipRest skips to the end of the object the scanner is inside, taking its
// closing brace. It checks only that strings end and brackets balance: it
// runs over the members of events the reader has no use for (CPU ops,
// flows, metadata), which is most of a trace.
func (s *scanner) skipRest() error {
	depth := 1
	for {
		for s.pos < s.end {
			switch class[s.buf[s.pos]] {
			case 0:
				s.pos++
				continue
			case 1:
				if _, _, err := s.str(); err != nil {
					return err
				}
				continue
			case 2:
				depth++
			case 3:
				depth--
				if depth == 0 {
					s.pos++
					return nil
				}
			}
			if depth > maxDepth {
				return s.fail("nesting too deep")
			}
			s.pos++
		}
		if !s.fill() {
			return s.fail("unterminated object")
		}
	}
}

// key reads an object key and the colon after it.
func (s *scanner) key() error {
	if _, _, err := s.str(); err != nil {
		return err
	}
	return s.expect(':')
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
