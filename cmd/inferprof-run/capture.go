// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

const (
	chunkSize = 32 << 10
	// chunkQueue chunks wait for the recogniser; when it falls behind (a
	// burst of output), chunks are skipped for it, never for the output.
	chunkQueue = 64
	// quiet is how long a stream stays silent before an open traceback is
	// sent: its last line may be the last for a while.
	quiet = 150 * time.Millisecond
)

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

type chunk struct {
	buf *[]byte
	n   int
	gap bool // chunks before this one were skipped
}

// pump copies src to dst as it arrives, one read, one write, no buffering
// in between, and hands a copy of each read to the recogniser without
// waiting for it. A failed write (our stdout closed) stops the writes, not
// the reads: the engine keeps running, as it would have if its own stdout
// had closed, and its errors are still read.
type pump struct {
	skipped atomic.Uint64 // chunks the recogniser did not see
	done    chan struct{}
}

func startPump(src io.Reader, dst io.Writer, r *recogniser) *pump {
	p := &pump{done: make(chan struct{})}
	ch := make(chan chunk, chunkQueue)
	go p.recognise(ch, r)
	go func() {
		defer close(ch)
		writing, gap := true, false
		for {
			bp := chunkPool.Get().(*[]byte)
			n, err := src.Read(*bp)
			if n > 0 && writing {
				if _, werr := dst.Write((*bp)[:n]); werr != nil {
					writing = false
				}
			}
			if n > 0 && r != nil {
				select {
				case ch <- chunk{buf: bp, n: n, gap: gap}:
					gap = false
				default:
					p.skipped.Add(1)
					chunkPool.Put(bp)
					gap = true
				}
			} else {
				chunkPool.Put(bp)
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// recognise splits chunks into lines for r. A line longer than
// maxClassifyBytes is cut; after a skipped chunk the partial line is
// dropped up to the next newline, so no line is stitched from two places.
func (p *pump) recognise(ch <-chan chunk, r *recogniser) {
	defer close(p.done)
	if r == nil {
		for c := range ch {
			chunkPool.Put(c.buf)
		}
		return
	}
	var partial []byte
	skipping := false
	timer := time.NewTimer(quiet)
	timer.Stop()
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				if len(partial) > 0 && !skipping {
					r.lineBytes(partial)
				}
				r.flush()
				return
			}
			b := (*c.buf)[:c.n]
			if c.gap {
				partial, skipping = partial[:0], true
			}
			for len(b) > 0 {
				i := bytes.IndexByte(b, '\n')
				if i < 0 {
					if !skipping && len(partial) < maxClassifyBytes {
						partial = append(partial, b[:min(len(b), maxClassifyBytes-len(partial))]...)
					}
					break
				}
				if !skipping {
					if len(partial) == 0 {
						r.lineBytes(b[:i])
					} else {
						partial = append(partial, b[:min(i, max(0, maxClassifyBytes-len(partial)))]...)
						r.lineBytes(partial)
					}
				}
				partial, skipping = partial[:0], false
				b = b[i+1:]
			}
			chunkPool.Put(c.buf)
			if r.open() {
				timer.Reset(quiet)
			}
		case <-timer.C:
			r.flush()
		}
	}
}
