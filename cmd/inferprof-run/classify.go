// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/inferprof/inferprof/internal/privacy"
)

// Error kinds, the value of attrErrorKind on each record (docs/names.md).
const (
	kindTraceback    = "traceback"            // a Python traceback, whole
	kindLogError     = "log_error"            // an ERROR or CRITICAL log line
	kindCUDAOOM      = "cuda_oom"             // CUDA out of memory
	kindIllegalAddr  = "cuda_illegal_address" // illegal memory access or instruction
	kindNCCL         = "nccl"                 // an NCCL error
	kindCUDA         = "cuda"                 // any other CUDA error
	kindArgument     = "argument"             // argparse rejected the command line
	kindExit         = "exit"                 // the final record: exit code
	kindSignal       = "signal"               // the final record: the signal it died of
	maxRecordLines   = 400
	maxRecordBytes   = 128 << 10
	maxClassifyBytes = 16 << 10 // a longer line is classified on its head only
)

// Severity numbers of the OTLP log data model.
const (
	sevInfo  = 9
	sevWarn  = 13
	sevError = 17
	sevFatal = 21
)

// event is one record for the collector. Its body is already scrubbed:
// nothing in it is free text from the engine except code locations,
// exception types and argparse's complaint about the command line.
type event struct {
	kind     string
	severity int
	body     string
	excType  string
	file     string
	line     int
	stream   string
}

var (
	// ansi is a terminal colour sequence (vLLM colours its header on a tty).
	ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	// vLLM's format (vllm/logger.py _FORMAT, 0.32): an optional
	// VLLM_LOGGING_PREFIX, "(%(vllm_process_name)s pid=%(process)d)
	// %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s";
	// older releases lack the process part, and their worker processes put
	// "(VllmWorkerProcess pid=N) " in front. NewLineFormatter repeats the
	// header on every line of a multi-line message (a traceback).
	vllmLine = regexp.MustCompile(`^(?:.*?\(([^()]*?) pid=\d+\) )?(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[([^\]]+?):(\d+)\] ?(.*)$`)
	// uvicorn's "ERROR:    msg" and Python logging's default "ERROR:name:msg".
	plainLevel = regexp.MustCompile(`^(DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:\s+|[\w.]*:)(.*)$`)
	// SGLang's format (srt/utils/common.py configure_logger):
	// "[%(asctime)s{ms}{prefix}] %(message)s", no level; its errors are
	// tracebacks and CUDA messages, found in the message.
	sglangLine = regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?[^\]]*\] (.*)$`)
	// argparse's last line: "PROG: error: MESSAGE", then exit code 2.
	argparseLine = regexp.MustCompile(`^([\w.\-]+(?: [\w.\-]+)*): error: (.*)$`)
	frameLine    = regexp.MustCompile(`^\s+File "[^"]*", line \d+(?:, in \S+)?\s*$`)
	excLine      = regexp.MustCompile(`^([A-Za-z_][\w.]*)(?::(.*))?$`)
	quoted       = regexp.MustCompile(`'[^']*'|"[^"]*"`)
)

const tracebackStart = "Traceback (most recent call last):"

// cudaKinds are tested in order on the raw text of a record; the first
// that matches names its kind. The phrase is ours: it goes in the body, the
// engine's words do not.
var cudaKinds = []struct {
	kind, phrase string
	re           *regexp.Regexp
}{
	{kindCUDAOOM, "CUDA out of memory", regexp.MustCompile(`CUDA out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED`)},
	{kindIllegalAddr, "CUDA illegal memory access", regexp.MustCompile(`illegal memory access|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|illegal instruction was encountered|cudaErrorIllegalInstruction`)},
	{kindNCCL, "NCCL error", regexp.MustCompile(`NCCL error|nccl\w*Error|ncclUnhandledCudaError|NCCL communicator was aborted|ProcessGroupNCCL.*(?:[Tt]imeout|[Ee]rror)`)},
	{kindCUDA, "CUDA error", regexp.MustCompile(`CUDA error|CUDA_ERROR_\w+|cudaError\w+|CUDA driver error|device-side assert`)},
}

func cudaKind(raw string) (kind, phrase string) {
	for _, c := range cudaKinds {
		if c.re.MatchString(raw) {
			return c.kind, c.phrase
		}
	}
	return "", ""
}

// header is what the engine's logger put before the message.
type header struct {
	key   string // everything before the message: equal keys, one record
	proc  string
	level string
	file  string
	line  int
	msg   string
}

// parseLine reads a log header in one of the engines' formats; ok is false
// for a line with none (raw stderr, a traceback's body under SGLang).
func parseLine(s string) (h header, ok bool) {
	if m := vllmLine.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[5])
		return header{key: s[:len(s)-len(m[6])], proc: m[1], level: m[2], file: m[4], line: n, msg: m[6]}, true
	}
	if m := plainLevel.FindStringSubmatch(s); m != nil {
		return header{key: m[1], level: m[1], msg: m[2]}, true
	}
	return header{}, false
}

func levelSeverity(level string) int {
	switch level {
	case "CRITICAL":
		return sevFatal
	case "ERROR":
		return sevError
	case "WARNING":
		return sevWarn
	}
	return sevInfo
}

// scrubTraceback keeps a traceback's shape: its "Traceback" and chaining
// lines, its frames (file, line, function: the engine's code, not its
// input) and each exception's type. Source lines, carets and every
// exception message become privacy.ErrorTextMarker, as the privacy
// processor does with exception.message and exception.stacktrace: a
// message can quote the prompt. It returns the last exception type.
func scrubTraceback(lines []string) (body []string, excType string) {
	inTB := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasSuffix(t, tracebackStart):
			body = append(body, tracebackStart)
			inTB = true
		case t == "":
		case strings.HasPrefix(t, "During handling of the above exception") ||
			strings.HasPrefix(t, "The above exception was the direct cause"):
			body = append(body, t)
		case frameLine.MatchString(l):
			body = append(body, l)
		case inTB && (l[0] == ' ' || l[0] == '\t'):
			// a source line or carets: the engine's code, dropped anyway to
			// keep records small
		default:
			m := excLine.FindStringSubmatch(t)
			if inTB && m != nil {
				excType = m[1]
				if strings.TrimSpace(m[2]) != "" {
					body = append(body, m[1]+": "+privacy.ErrorTextMarker)
				} else {
					body = append(body, m[1])
				}
				inTB = false
				continue
			}
			if len(body) == 0 || body[len(body)-1] != privacy.ErrorTextMarker {
				body = append(body, privacy.ErrorTextMarker)
			}
		}
	}
	return body, excType
}

// scrubArgparse keeps argparse's complaint, which names the command line's
// flags, with quoted values and the operands after "unrecognized
// arguments:" replaced: a value can be a secret (--api-key).
func scrubArgparse(prog, msg string) string {
	if rest, ok := strings.CutPrefix(msg, "unrecognized arguments:"); ok {
		var kept []string
		for _, f := range strings.Fields(rest) {
			if strings.HasPrefix(f, "-") {
				f, _, _ = strings.Cut(f, "=")
				kept = append(kept, f)
			} else if len(kept) == 0 || kept[len(kept)-1] != "…" {
				kept = append(kept, "…")
			}
		}
		msg = "unrecognized arguments: " + strings.Join(kept, " ")
	}
	return prog + ": error: " + quoted.ReplaceAllString(msg, "'…'")
}
