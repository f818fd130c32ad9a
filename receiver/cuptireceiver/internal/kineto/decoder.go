// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ErrNotTrace means the input is JSON but not a Kineto trace.
var ErrNotTrace = errors.New("not a Kineto trace")

// Decoder streams the events of a Kineto (Chrome trace) JSON document,
// keeping only the current event: memory does not grow with the file.
type Decoder struct {
	s        *scanner
	started  bool
	inEvents bool
	done     bool
	sawEvs   bool
	base     uint64
	hasBase  bool
	n        int // events read
	arrN     int // events read from the current traceEvents array
	want     Categories
}

// NewDecoder returns a decoder reading r that fills in the events of the
// categories in want; the others come back with only Phase and Cat set,
// skipped at little cost (a CPU op's input shapes, a flow's ids).
func NewDecoder(r io.Reader, want Categories) *Decoder {
	return &Decoder{s: newScanner(r), want: want}
}

// Base returns baseTimeNanoseconds, if the document had one so far. Kineto
// writes it before traceEvents; PyTorch 2.x traces have it after them.
func (d *Decoder) Base() (uint64, bool) { return d.base, d.hasBase }

// Next reads the next event into ev. It returns false at the end of the
// document, after which Base is final.
func (d *Decoder) Next(ev *Event) (bool, error) {
	s := d.s
	if !d.started {
		d.started = true
		if s.peek() != '{' {
			if s.err != nil {
				return false, s.err
			}
			return false, fmt.Errorf("expected an object: %w", ErrNotTrace)
		}
		s.pos++
		if s.peek() == '}' {
			s.pos++
			d.done = true
		}
	}
	for !d.done {
		if d.inEvents {
			c := s.peek()
			if c == ']' {
				s.pos++
				d.inEvents = false
				if err := d.afterMember(); err != nil {
					return false, err
				}
				continue
			}
			if d.arrN > 0 {
				if c != ',' {
					return false, s.fail("expected , or ] after an event")
				}
				s.pos++
			}
			ev.reset()
			if err := d.event(ev); err != nil {
				return false, fmt.Errorf("traceEvents[%d]: %w", d.n, err)
			}
			d.n++
			d.arrN++
			return true, nil
		}
		k, err := s.text()
		if err != nil {
			return false, err
		}
		key := string(k) // top-level keys are few
		if err := s.expect(':'); err != nil {
			return false, err
		}
		switch key {
		case "traceEvents":
			if s.peek() != '[' {
				return false, fmt.Errorf("traceEvents is not an array: %w", ErrNotTrace)
			}
			s.pos++
			d.sawEvs, d.inEvents, d.arrN = true, true, 0
			if s.peek() == ']' {
				s.pos++
				d.inEvents = false
				if err := d.afterMember(); err != nil {
					return false, err
				}
			}
			continue
		case "baseTimeNanoseconds":
			b, err := s.num()
			if err != nil {
				return false, fmt.Errorf("baseTimeNanoseconds: %w", err)
			}
			v, err := strconv.ParseUint(string(b), 10, 64)
			if err != nil {
				return false, fmt.Errorf("baseTimeNanoseconds %q: %w", b, ErrNotTrace)
			}
			d.base, d.hasBase = v, true
		default:
			if err := s.skip(); err != nil {
				return false, fmt.Errorf("value of %q: %w", key, err)
			}
		}
		if err := d.afterMember(); err != nil {
			return false, err
		}
	}
	if !d.sawEvs {
		return false, fmt.Errorf("no traceEvents: %w", ErrNotTrace)
	}
	return false, nil
}

// afterMember takes the , or } after a top-level member.
func (d *Decoder) afterMember() error {
	switch d.s.peek() {
	case ',':
		d.s.pos++
		return nil
	case '}':
		d.s.pos++
		d.done = true
		return nil
	}
	return d.s.fail("expected , or } in the trace object")
}

// event parses one traceEvents element, an object.
func (d *Decoder) event(ev *Event) error {
	s := d.s
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		key, err := d.key(eventKey)
		if err != nil {
			return err
		}
		switch key {
		case keyPh:
			if v, ok, err := d.optText(); err != nil {
				return err
			} else if ok && len(v) == 1 {
				ev.Phase = v[0]
			}
		case keyCat:
			if v, ok, err := d.optText(); err != nil {
				return err
			} else if ok {
				ev.Cat, ev.catSeen = category(v), true
				// Fields read before the category was known are dropped
				// for the categories not wanted.
				if !d.want.Has(ev.Cat) {
					ph, cat := ev.Phase, ev.Cat
					ev.reset()
					ev.Phase, ev.Cat, ev.catSeen = ph, cat, true
				}
			}
		case keyName:
			if v, ok, err := d.optText(); err != nil {
				return err
			} else if ok {
				ev.Name = append(ev.Name[:0], v...)
			}
		case keyTS:
			ev.TS, ev.HasTS, err = d.micros(ev)
			if err != nil {
				return err
			}
		case keyDur:
			ev.Dur, ev.HasDur, err = d.micros(ev)
			if err != nil {
				return err
			}
		case keyArgs:
			if err := d.args(ev); err != nil {
				return fmt.Errorf("args: %w", err)
			}
		case keyPID, keyTID:
			dst := &ev.PID
			if key == keyTID {
				dst = &ev.TID
			}
			if v, ok, err := d.optInt(); err != nil {
				return err
			} else if ok {
				*dst = v
			}
		default:
			if err := s.skip(); err != nil {
				return err
			}
		}
		if end, err := d.memberEnd("an event"); end || err != nil {
			return err
		}
		if (ev.Phase != 0 && ev.Phase != 'X') || (ev.catSeen && !d.want.Has(ev.Cat)) {
			// A CPU op, a flow or metadata: nothing more is needed from it.
			// (Kineto writes ph and cat first.)
			return s.skipRest()
		}
	}
}

// Keys the decoder reads.
const (
	keyOther = iota
	keyPh
	keyCat
	keyName
	keyTS
	keyDur
	keyArgs
	keyDevice
	keyStream
	keyCorr
	keyExternal
	keyBytes
	keySyncKind
	keyPID
	keyTID
)

func eventKey(k []byte) int {
	switch string(k) {
	case "ph":
		return keyPh
	case "cat":
		return keyCat
	case "name":
		return keyName
	case "ts":
		return keyTS
	case "dur":
		return keyDur
	case "args":
		return keyArgs
	case "pid":
		return keyPID
	case "tid":
		return keyTID
	}
	return keyOther
}

func argKey(k []byte) int {
	switch string(k) {
	case "device":
		return keyDevice
	case "stream":
		return keyStream
	case "correlation":
		return keyCorr
	case "External id":
		return keyExternal
	case "bytes":
		return keyBytes
	case "cuda_sync_kind":
		return keySyncKind
	}
	return keyOther
}

// key reads an object key and the colon after it, and returns what
// classify makes of it: classified before the next read, which may move
// the buffer the key's bytes are in.
func (d *Decoder) key(classify func([]byte) int) (int, error) {
	k, esc, err := d.s.str()
	if err != nil {
		return 0, err
	}
	if esc {
		if k, err = unescape(nil, k); err != nil {
			return 0, fmt.Errorf("key: %w", ErrSyntax)
		}
	}
	key := classify(k)
	return key, d.s.expect(':')
}

// memberEnd takes the , or } after an object member; end is true at }.
func (d *Decoder) memberEnd(in string) (end bool, err error) {
	switch d.s.peek() {
	case ',':
		d.s.pos++
		return false, nil
	case '}':
		d.s.pos++
		return true, nil
	}
	return false, d.s.fail("expected , or } in " + in)
}

// optText reads a string value; a value of another type is skipped and
// ok is false.
func (d *Decoder) optText() (v []byte, ok bool, err error) {
	if d.s.peek() != '"' {
		return nil, false, d.s.skip()
	}
	v, err = d.s.text()
	return v, err == nil, err
}

// optInt reads an integer value; anything else is skipped, ok false.
func (d *Decoder) optInt() (int64, bool, error) {
	s := d.s
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, false, s.skip()
	}
	b, err := s.num()
	if err != nil {
		return 0, false, err
	}
	v, ok := parseInt(b)
	return v, ok, nil
}

// micros reads ts or dur. A value that is not a non-negative number is
// noted in ev.TSErr (an error only for the events the receiver keeps).
func (d *Decoder) micros(ev *Event) (uint64, bool, error) {
	s := d.s
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		if c == '"' {
			// Some exporters write ts as a string; take its content.
			v, err := s.text()
			if err != nil {
				return 0, false, err
			}
			ns, err := parseMicros(v)
			if err != nil && ev.TSErr == nil {
				ev.TSErr = err
			}
			return ns, err == nil, nil
		}
		return 0, false, s.skip()
	}
	b, err := s.num()
	if err != nil {
		return 0, false, err
	}
	ns, err := parseMicros(b)
	if err != nil && ev.TSErr == nil {
		ev.TSErr = err
	}
	return ns, err == nil, nil
}

// args reads the args object, keeping the fields the receiver uses.
func (d *Decoder) args(ev *Event) error {
	s := d.s
	if s.peek() != '{' {
		return s.skip()
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		key, err := d.key(argKey)
		if err != nil {
			return err
		}
		var dst *int64
		switch key {
		case keyDevice:
			dst = &ev.Device
		case keyStream:
			dst = &ev.Stream
		case keyCorr:
			dst = &ev.Corr
		case keyExternal:
			dst = &ev.External
		case keyBytes:
			dst = &ev.Bytes
		case keySyncKind:
			if v, ok, err := d.optText(); err != nil {
				return err
			} else if ok {
				ev.SyncKind = append(ev.SyncKind[:0], v...)
			}
		default:
			if err := s.skip(); err != nil {
				return err
			}
		}
		if dst != nil {
			if v, ok, err := d.optInt(); err != nil {
				return err
			} else if ok {
				*dst = v
			}
		}
		if end, err := d.memberEnd("args"); end || err != nil {
			return err
		}
	}
}

// parseMicros parses a non-negative microsecond number ("12", "41.407")
// into nanoseconds exactly: float64 would lose nanoseconds on epoch
// timestamps. Digits past the third decimal are dropped, as the previous
// reader did.
func parseMicros(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errors.New("missing")
	}
	for _, c := range b {
		if c == 'e' || c == 'E' || c == '-' {
			f, err := strconv.ParseFloat(string(b), 64)
			if err != nil || f < 0 || f > 1.8e13 {
				return 0, fmt.Errorf("bad microseconds %q", b)
			}
			return uint64(f*1000 + 0.5), nil
		}
	}
	var whole uint64
	i := 0
	for ; i < len(b) && b[i] != '.'; i++ {
		c := b[i]
		if c < '0' || c > '9' || whole > (1<<63/1000)/10 {
			return 0, fmt.Errorf("bad microseconds %q", b)
		}
		whole = whole*10 + uint64(c-'0')
	}
	if whole > 1<<63/1000 {
		return 0, fmt.Errorf("bad microseconds %q", b)
	}
	ns := whole * 1000
	if i < len(b) { // b[i] == '.'
		frac := b[i+1:]
		scale := uint64(100)
		for j, c := range frac {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("bad microseconds %q", b)
			}
			if j < 3 {
				ns += uint64(c-'0') * scale
				scale /= 10
			}
		}
	}
	return ns, nil
}
