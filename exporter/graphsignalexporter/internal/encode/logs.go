// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/privacy"
)

// Logs encodes ld into LogBatches, one per distinct tag set.
func (e *Encoder) Logs(ld plog.Logs) (*signalsv1.UploadRequest, Stats) {
	now := e.now().UnixNano()
	req := &signalsv1.UploadRequest{UploadTs: now}
	res := e.newResourceBuilder(now)
	batches := map[uint64]*signalsv1.LogBatch{}
	tags := tagSet{cache: map[kv]*signalsv1.Tag{}}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		rattrs := rl.Resource().Attributes()
		res.add(rattrs)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				if privacy.IsContentLogRecord(lr) {
					// A prompt or completion event: nothing in it may leave,
					// even in a config without the privacy processor.
					continue
				}
				xid, isXID := e.xidCode(lr)
				tags.reset(e.global)
				tags.putMap(rattrs, notResourceTag)
				if e.graphsignal() {
					tags.rename(true)
				}
				tags.putMap(lr.Attributes(), func(k string) bool {
					// An XID's code is in its message, as Graphsignal logs it.
					return strings.HasPrefix(k, "exception.") || (isXID && strings.HasPrefix(k, "nvidia.gpu."))
				})
				if e.graphsignal() {
					tags.rename(false)
				}
				key := tags.finish()
				lb, ok := batches[key]
				if !ok {
					lb = &signalsv1.LogBatch{Tags: tags.v1Tags()}
					batches[key] = lb
					req.LogBatches = append(req.LogBatches, lb)
				}
				le := logEntry(lr)
				if isXID {
					le.Message = "XID error " + strconv.FormatInt(xid, 10)
				}
				lb.LogEntries = append(lb.LogEntries, le)
			}
		}
	}
	req.Resources = res.finish()
	return req, Stats{Truncated: tags.truncated}
}

// xidCode returns the XID of an nvml receiver XID record when encoding
// with Graphsignal's names: Graphsignal logs each as an ERROR
// "XID error <code>" (recorders/nvml_recorder.py @ b76d851).
func (e *Encoder) xidCode(lr plog.LogRecord) (int64, bool) {
	if !e.graphsignal() {
		return 0, false
	}
	v, ok := lr.Attributes().Get(names.AttrXID)
	if !ok || v.Type() != pcommon.ValueTypeInt {
		return 0, false
	}
	return v.Int(), true
}

func logEntry(lr plog.LogRecord) *signalsv1.LogEntry {
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	body := lr.Body()
	if body.Type() == pcommon.ValueTypeMap {
		// A structured body may carry content keys: send a scrubbed copy.
		scrubbed := pcommon.NewValueEmpty()
		body.CopyTo(scrubbed)
		privacy.DefaultScrubber().Map(scrubbed.Map())
		body = scrubbed
	}
	msg, _ := cut(clean(body.AsString()), maxMessage)
	return &signalsv1.LogEntry{
		Level:     Level(lr.SeverityNumber(), lr.SeverityText()),
		Message:   msg,
		Exception: exception(lr.Attributes()),
		LogTs:     int64(ts),
	}
}

// exception is what a log entry says of its exception: the type, and for
// the message and stacktrace the privacy marker, since error text can quote
// prompts (internal/privacy, errortext.go); this holds in a config without
// the privacy processor too.
func exception(attrs pcommon.Map) string {
	var parts []string
	if v, ok := attrs.Get("exception.type"); ok && v.AsString() != "" {
		parts = append(parts, v.AsString())
	}
	for _, k := range privacy.ErrorTextAttributes {
		if v, ok := attrs.Get(k); ok && v.AsString() != "" {
			parts = append(parts, privacy.ErrorTextMarker)
			break
		}
	}
	s, _ := cut(clean(strings.Join(parts, ": ")), maxExcept)
	return s
}

// Level maps an OTLP severity to Graphsignal's log level: severity numbers
// 1-8 DEBUG, 9-12 INFO, 13-16 WARNING, 17-20 ERROR, 21-24 CRITICAL; with no
// number, the severity text decides, and INFO when it says nothing. These
// are the five levels graphsignal 1.1.2's collector uploads (its
// _LOG_LEVEL_MAP, INFO for any other); it never sends TRACE or UNSPECIFIED.
func Level(n plog.SeverityNumber, text string) signalsv1.LogEntry_LogLevel {
	switch {
	case n >= 21:
		return signalsv1.LogEntry_CRITICAL_LEVEL
	case n >= 17:
		return signalsv1.LogEntry_ERROR_LEVEL
	case n >= 13:
		return signalsv1.LogEntry_WARNING_LEVEL
	case n >= 9:
		return signalsv1.LogEntry_INFO_LEVEL
	case n >= 1:
		return signalsv1.LogEntry_DEBUG_LEVEL
	}
	t := strings.ToLower(text)
	switch {
	case strings.HasPrefix(t, "fatal"), strings.HasPrefix(t, "crit"), strings.HasPrefix(t, "panic"):
		return signalsv1.LogEntry_CRITICAL_LEVEL
	case strings.HasPrefix(t, "err"):
		return signalsv1.LogEntry_ERROR_LEVEL
	case strings.HasPrefix(t, "warn"):
		return signalsv1.LogEntry_WARNING_LEVEL
	case strings.HasPrefix(t, "info"):
		return signalsv1.LogEntry_INFO_LEVEL
	case strings.HasPrefix(t, "debug"), strings.HasPrefix(t, "trace"):
		return signalsv1.LogEntry_DEBUG_LEVEL
	}
	return signalsv1.LogEntry_INFO_LEVEL
}
