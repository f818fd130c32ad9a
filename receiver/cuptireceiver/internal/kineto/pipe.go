// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"errors"
	"io"
)

// pipeChunk is the unit the decompressing goroutine hands over.
const pipeChunk = 256 << 10

// pipeDepth chunks may be in flight: memory stays at pipeDepth × pipeChunk.
const pipeDepth = 4

type chunk struct {
	b   []byte
	err error
}

// pipeReader runs the reads of r (gunzip, for a .gz trace) on a goroutine
// of its own, so decompression and decoding overlap where a second core is
// free; on one core it costs one copy of the data. Close stops the goroutine.
type pipeReader struct {
	full  chan chunk
	empty chan []byte
	done  chan struct{}
	gone  chan struct{} // closed when the goroutine has returned
	buf   []byte        // the chunk being read
	off   int
	err   error
}

func newPipeReader(r io.Reader) *pipeReader {
	p := &pipeReader{
		full: make(chan chunk, pipeDepth), empty: make(chan []byte, pipeDepth),
		done: make(chan struct{}), gone: make(chan struct{}),
	}
	for range pipeDepth {
		p.empty <- make([]byte, pipeChunk)
	}
	go p.fill(r)
	return p
}

func (p *pipeReader) fill(r io.Reader) {
	defer close(p.gone)
	defer close(p.full)
	for {
		var b []byte
		select {
		case b = <-p.empty:
		case <-p.done:
			return
		}
		n, err := io.ReadFull(r, b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		select {
		case p.full <- chunk{b: b[:n], err: err}:
		case <-p.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *pipeReader) Read(b []byte) (int, error) {
	for p.off >= len(p.buf) {
		if p.buf != nil {
			p.empty <- p.buf[:cap(p.buf)] // never blocks: there are pipeDepth buffers
			p.buf = nil
		}
		if p.err != nil {
			return 0, p.err
		}
		c, ok := <-p.full
		if !ok {
			return 0, io.EOF
		}
		p.buf, p.off, p.err = c.b, 0, c.err
	}
	n := copy(b, p.buf[p.off:])
	p.off += n
	return n, nil
}

// Close stops the goroutine and waits for it, so r may be closed after:
// at most one read of r is still under way when Close is called.
func (p *pipeReader) Close() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	<-p.gone
}
