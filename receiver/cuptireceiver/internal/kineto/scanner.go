// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"errors"
	"fmt"
	"io"
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
