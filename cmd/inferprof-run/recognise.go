// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/inferprof/inferprof/internal/privacy"
)

// recogniser turns one stream's lines into error events. Only ERROR and
// CRITICAL records, tracebacks, CUDA and NCCL errors and argparse's
// complaint become events; every other line (INFO included, where some
// releases log the prompt) is read for its header and forgotten.
type recogniser struct {
	stream string
	emit   func(event)

	rec    []string // message lines of the open multi-line log record
	recHdr header
	tb     []string // lines of the open raw traceback
	tbExc  bool     // its exception line has been seen
	tbLead string   // the log header the traceback started in (SGLang)
	size   int
}

func (r *recogniser) open() bool { return r.rec != nil || r.tb != nil }

// keywords: a line holding none of them, with nothing open, cannot start an
// event, and is dropped before any regular expression or allocation. Most
// lines (INFO, progress) go this way.
var keywords = [][]byte{
	[]byte("ERROR"), []byte("CRITICAL"), []byte("Traceback"), []byte("error"), []byte("Error"),
	[]byte("CUDA"), []byte("cuda"), []byte("NCCL"), []byte("nccl"), []byte("illegal"), []byte("CUBLAS"), []byte("device-side"),
}

// lineBytes is line for a line still in the reader's buffer.
func (r *recogniser) lineBytes(b []byte) {
	if !r.open() {
		hit := false
		for _, k := range keywords {
			if bytes.Contains(b, k) {
				hit = true
				break
			}
		}
		if !hit {
			return
		}
	}
	r.line(string(b))
}

func (r *recogniser) line(s string) {
	if len(s) > maxClassifyBytes {
		s = s[:maxClassifyBytes]
	}
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansi.ReplaceAllString(s, "")
	}
	s = strings.TrimRight(s, "\r")

	if h, ok := parseLine(s); ok {
		if r.tb != nil {
			r.flushTB()
		}
		if r.rec != nil && h.key == r.recHdr.key && len(r.rec) < maxRecordLines && r.size < maxRecordBytes {
			r.rec = append(r.rec, h.msg)
			r.size += len(h.msg)
			return
		}
		r.flushRec()
		if h.level == "ERROR" || h.level == "CRITICAL" {
			r.rec, r.recHdr, r.size = []string{h.msg}, h, len(h.msg)
		}
		return
	}
	r.flushRec()
	lead := ""
	if m := sglangLine.FindStringSubmatch(s); m != nil {
		if r.tb != nil {
			r.flushTB()
		}
		lead, s = s[:len(s)-len(m[1])], m[1]
	}
	if r.tb != nil {
		if r.tbContinues(s) && len(r.tb) < maxRecordLines && r.size < maxRecordBytes {
			r.tb = append(r.tb, s)
			r.size += len(s)
			return
		}
		r.flushTB()
	}
	switch {
	case strings.Contains(s, tracebackStart):
		r.tb, r.tbExc, r.tbLead, r.size = []string{s}, false, lead, len(s)
	case lead == "" && argparseLine.MatchString(s):
		m := argparseLine.FindStringSubmatch(s)
		r.emit(event{kind: kindArgument, severity: sevError, body: scrubArgparse(m[1], m[2]), stream: r.stream})
	default:
		if kind, phrase := cudaKind(s); kind != "" {
			r.emit(event{kind: kind, severity: sevError, body: strings.TrimSpace(lead + " " + phrase + ": " + privacy.ErrorTextMarker), stream: r.stream})
		}
	}
}

// tbContinues says whether s still belongs to the open traceback: blank
// lines, indented frames and source, the chaining sentences, and one
// unindented line, the exception.
func (r *recogniser) tbContinues(s string) bool {
	t := strings.TrimSpace(s)
	switch {
	case t == "", s[0] == ' ', s[0] == '\t':
		return true
	case strings.HasPrefix(t, "During handling of the above exception"),
		strings.HasPrefix(t, "The above exception was the direct cause"),
		strings.Contains(t, tracebackStart):
		r.tbExc = false
		return true
	case !r.tbExc:
		r.tbExc = true
		return true
	}
	return false
}

// flush closes what is open; the reader calls it when the stream has been
// quiet a moment, so a traceback's last line is not held.
func (r *recogniser) flush() {
	r.flushRec()
	r.flushTB()
}

func (r *recogniser) flushTB() {
	if r.tb == nil {
		return
	}
	raw := strings.Join(r.tb, "\n")
	body, exc := scrubTraceback(r.tb)
	if r.tbLead != "" {
		body = append([]string{r.tbLead}, body...)
	}
	ev := event{kind: kindTraceback, severity: sevError, excType: exc, stream: r.stream}
	if kind, _ := cudaKind(raw); kind != "" {
		ev.kind = kind
	}
	ev.body = strings.Join(body, "\n")
	r.tb, r.tbLead = nil, ""
	r.emit(ev)
}

func (r *recogniser) flushRec() {
	if r.rec == nil {
		return
	}
	h := r.recHdr
	raw := strings.Join(r.rec, "\n")
	head := h.level
	if h.proc != "" {
		head = "(" + h.proc + ") " + head
	}
	if h.file != "" {
		head += " [" + h.file + ":" + strconv.Itoa(h.line) + "]"
	}
	ev := event{kind: kindLogError, severity: levelSeverity(h.level), file: h.file, line: h.line, stream: r.stream}
	kind, phrase := cudaKind(raw)
	if strings.Contains(raw, tracebackStart) {
		ev.kind = kindTraceback
		var body []string
		body, ev.excType = scrubTraceback(r.rec)
		if len(body) > 0 && body[0] == privacy.ErrorTextMarker {
			body = body[1:] // the message before the traceback
		}
		ev.body = head + " " + privacy.ErrorTextMarker + "\n" + strings.Join(body, "\n")
	} else {
		msg := privacy.ErrorTextMarker
		if phrase != "" {
			msg = phrase + ": " + msg
		}
		ev.body = head + " " + msg
	}
	if kind != "" {
		ev.kind = kind
	}
	r.rec = nil
	r.emit(ev)
}
