// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"bufio"
	"encoding/json"
	"io"
)

// countingWriter counts what reaches w and remembers its first error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// StreamTrace writes sn as a Chrome trace to w, each event encoded as it is
// drawn: memory holds one event and a 64 KiB buffer, never the document.
// Past maxBytes (0: no cap) it writes no more events, and otherData says so
// (truncated, events_omitted); the document stays valid JSON. It returns what
// it wrote in otherData, and the first write error.
func StreamTrace(w io.Writer, sn Snapshot, maxBytes int64) (OtherData, error) {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	enc := json.NewEncoder(bw)
	_, _ = bw.WriteString(`{"traceEvents":[`)
	first, truncated, omitted := true, false, 0
	od := render(sn, func(e Event) {
		if truncated || cw.err != nil {
			omitted++
			return
		}
		if maxBytes > 0 && cw.n+int64(bw.Buffered()) >= maxBytes {
			truncated = true
			omitted++
			return
		}
		if !first {
			_ = bw.WriteByte(',')
		}
		first = false
		_ = enc.Encode(e) // its trailing newline is whitespace between elements
	})
	od.Truncated, od.EventsOmitted = truncated, omitted
	_, _ = bw.WriteString(`],"displayTimeUnit":"ms","otherData":`)
	_ = enc.Encode(od)
	_, _ = bw.WriteString("}\n")
	_ = bw.Flush()
	return od, cw.err
}
