// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

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
