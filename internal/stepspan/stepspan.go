// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepspan is the one reader of engine.step spans (as the
// engine_step receiver makes them, docs/names.md). Every consumer (the
// step window, the GPU join, the timeline, the connector) reads a step
// through it, under one rule for a bad value: the attribute reads as
// absent, and the Reader counts it (otelcol_engine_step_bad_attributes)
// and logs the first one.
//
//go:generate go tool mdatagen metadata.yaml
package stepspan // import "github.com/inferprof/inferprof/internal/stepspan"

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// Absent is the value of an integer field whose attribute is absent or bad.
const Absent = -1

// Step is what an engine.step span says. Integer fields are Absent when
// not picked (Fields) or when their attribute is absent or bad;
// KVCacheUsage is NaN then.
type Step struct {
	StartUnixNs, EndUnixNs int64

	Index           int64 // inferprof.step.index
	Batch           int64 // inferprof.step.batch
	ThreadID        int64 // thread.id: the engine thread that ran the step
	ScheduledTokens int64 // inferprof.step.scheduled_tokens
	PrefillRequests int64 // inferprof.step.prefill_requests
	DecodeRequests  int64 // inferprof.step.decode_requests
	RunningRequests int64 // inferprof.step.running_requests
	WaitingRequests int64 // inferprof.step.waiting_requests
	// Preempted is the count of inferprof.step.preempted_request_ids (a
	// list of ids, or a count).
	Preempted    int64
	KVCacheUsage float64 // inferprof.step.kv_cache_usage

	// RequestIDs got RequestTokens[i] tokens each; RequestTokens is empty
	// when the span gives none (one token each) and otherwise as long as
	// RequestIDs gives it. The slices are reused by the next Read.
	RequestIDs    []string
	RequestTokens []int64
	Truncated     bool // inferprof.step.request_ids_truncated

	// Windows are the intervals in which the engine process launched the
	// batch (inferprof.step.launch.*, wire version 4); nil when absent or
	// inconsistent. Reused by the next Read.
	Windows []Window

	// Bad counts the attributes read as absent for a bad value; BadKey
	// names the first.
	Bad    int
	BadKey string
}

// Window is one launch interval, in Unix ns, on one thread (0: any).
type Window struct {
	Start, End int64
	ThreadID   uint32
}

// Fields picks what Read reads beyond the span's times and step index, so
// each consumer pays for what it uses; what it does not pick stays Absent
// (NaN, empty).
type Fields uint8

const (
	// Batch: the scheduled tokens and the batch composition (prefill,
	// decode, running, waiting, preempted requests, KV cache usage).
	Batch Fields = 1 << iota
	// Requests: the request ids, their tokens and the truncated flag.
	Requests
	// Launch: the engine thread, the batch number, the scheduled tokens
	// and the launch windows.
	Launch
	// All is every field.
	All = Batch | Requests | Launch
)

// Read fills dst with what want picks of span, which must be an
// engine.step span; it returns false, leaving dst as it was, for any other
// span.
func Read(span ptrace.Span, dst *Step, want Fields) bool {
	if span.Name() != names.SpanEngineStep {
		return false
	}
	ids, toks, ws := dst.RequestIDs[:0], dst.RequestTokens[:0], dst.Windows[:0]
	*dst = Step{
		StartUnixNs: int64(span.StartTimestamp()), EndUnixNs: int64(span.EndTimestamp()),
		Index: Absent, Batch: Absent, ThreadID: Absent, ScheduledTokens: Absent,
		PrefillRequests: Absent, DecodeRequests: Absent, RunningRequests: Absent, WaitingRequests: Absent,
		Preempted: Absent, KVCacheUsage: math.NaN(),
	}
	a := span.Attributes()
	// One Get per key: cheaper than a switch over every attribute, most of
	// which have keys of other lengths (Get compares lengths first).
	if v, ok := a.Get(names.AttrStepIndex); ok {
		dst.Index = dst.integer(names.AttrStepIndex, v)
	}
	if want&(Batch|Launch) != 0 {
		if v, ok := a.Get(names.AttrStepScheduledToks); ok {
			dst.ScheduledTokens = dst.integer(names.AttrStepScheduledToks, v)
		}
	}
	if want&Batch != 0 {
		dst.readBatch(a)
	}
	if want&Requests != 0 {
		if v, ok := a.Get(names.AttrStepIDsTruncated); ok {
			if v.Type() == pcommon.ValueTypeBool {
				dst.Truncated = v.Bool()
			} else {
				dst.bad(names.AttrStepIDsTruncated)
			}
		}
		if v, ok := a.Get(names.AttrStepRequestIDs); ok {
			ids = dst.strings(names.AttrStepRequestIDs, v, ids)
		}
		if v, ok := a.Get(names.AttrStepRequestTokens); ok {
			toks = dst.integers(names.AttrStepRequestTokens, v, toks)
		}
	}
	dst.RequestIDs, dst.RequestTokens = ids, toks
	if want&Launch != 0 {
		dst.readLaunch(a, ws)
	}
	return true
}

func (dst *Step) readBatch(a pcommon.Map) {
	if v, ok := a.Get(names.AttrStepPrefillReqs); ok {
		dst.PrefillRequests = dst.integer(names.AttrStepPrefillReqs, v)
	}
	if v, ok := a.Get(names.AttrStepDecodeReqs); ok {
		dst.DecodeRequests = dst.integer(names.AttrStepDecodeReqs, v)
	}
	if v, ok := a.Get(names.AttrStepRunningReqs); ok {
		dst.RunningRequests = dst.integer(names.AttrStepRunningReqs, v)
	}
	if v, ok := a.Get(names.AttrStepWaitingReqs); ok {
		dst.WaitingRequests = dst.integer(names.AttrStepWaitingReqs, v)
	}
	if v, ok := a.Get(names.AttrStepPreempted); ok {
		if v.Type() == pcommon.ValueTypeSlice {
			dst.Preempted = int64(v.Slice().Len())
		} else {
			dst.Preempted = dst.integer(names.AttrStepPreempted, v)
		}
	}
	if v, ok := a.Get(names.AttrStepKVCacheUsage); ok {
		dst.KVCacheUsage = dst.fraction(names.AttrStepKVCacheUsage, v)
	}
}

func (dst *Step) readLaunch(a pcommon.Map, ws []Window) {
	if v, ok := a.Get(names.AttrStepBatch); ok {
		dst.Batch = dst.integer(names.AttrStepBatch, v)
	}
	if v, ok := a.Get(names.AttrThreadID); ok {
		dst.ThreadID = dst.integer(names.AttrThreadID, v)
	}
	starts, hs := a.Get(names.AttrStepLaunchStarts)
	ends, he := a.Get(names.AttrStepLaunchEnds)
	threads, ht := a.Get(names.AttrStepLaunchThreads)
	var has uint8 // which launch lists are present: 1 starts, 2 ends, 4 threads
	for i, h := range [3]bool{hs, he, ht} {
		if h {
			has |= 1 << i
		}
	}
	if has != 0 {
		dst.Windows = dst.windows(has, starts, ends, threads, ws)
	}
}

func (dst *Step) bad(k string) {
	if dst.Bad == 0 {
		dst.BadKey = k
	}
	dst.Bad++
}

// integer reads a count or an id: an int, or a double that holds one
// exactly (OTLP/JSON senders), not negative.
func (dst *Step) integer(k string, v pcommon.Value) int64 {
	if i, ok := integer(v); ok {
		return i
	}
	dst.bad(k)
	return Absent
}

func integer(v pcommon.Value) (int64, bool) {
	// Fast path: only an int value reads as a positive Int, and asking the
	// type as well would cost a second look at the value per element.
	if i := v.Int(); i > 0 {
		return i, true
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		if i := v.Int(); i >= 0 {
			return i, true
		}
	case pcommon.ValueTypeDouble:
		// 2^63 is the first double past MaxInt64.
		if f := v.Double(); f >= 0 && f < (1<<63) && f == math.Trunc(f) {
			return int64(f), true
		}
	}
	return 0, false
}

// fraction reads a finite, non-negative number.
func (dst *Step) fraction(k string, v pcommon.Value) float64 {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		if f := v.Double(); f >= 0 && !math.IsInf(f, 0) {
			return f
		}
	case pcommon.ValueTypeInt:
		if i := v.Int(); i >= 0 {
			return float64(i)
		}
	}
	dst.bad(k)
	return math.NaN()
}

// strings reads a list of strings; one element of another type makes the
// whole list bad, so ids never shift against their token counts.
func (dst *Step) strings(k string, v pcommon.Value, out []string) []string {
	if v.Type() != pcommon.ValueTypeSlice {
		dst.bad(k)
		return out
	}
	s := v.Slice()
	for i := range s.Len() {
		e := s.At(i)
		// As in integer: only a string value reads as a non-empty Str.
		str := e.Str()
		if str == "" && e.Type() != pcommon.ValueTypeStr {
			dst.bad(k)
			return out[:0]
		}
		out = append(out, str)
	}
	return out
}

// integers reads a list of integers under integer's rule, all or nothing.
func (dst *Step) integers(k string, v pcommon.Value, out []int64) []int64 {
	if v.Type() != pcommon.ValueTypeSlice {
		dst.bad(k)
		return out
	}
	s := v.Slice()
	for i := range s.Len() {
		n, ok := integer(s.At(i))
		if !ok {
			dst.bad(k)
			return out[:0]
		}
		out = append(out, n)
	}
	return out
}

// windows zips the three launch lists, some of them present. Lists
// of other lengths or types, or an interval that ends before it starts, are
// bad and leave the step to its time range.
func (dst *Step) windows(has uint8, starts, ends, threads pcommon.Value, out []Window) []Window {
	const slice = pcommon.ValueTypeSlice
	if has != 7 || starts.Type() != slice || ends.Type() != slice || threads.Type() != slice {
		dst.bad(names.AttrStepLaunchStarts)
		return nil
	}
	s, e, t := starts.Slice(), ends.Slice(), threads.Slice()
	if e.Len() != s.Len() || t.Len() != s.Len() {
		dst.bad(names.AttrStepLaunchStarts)
		return nil
	}
	for i := range s.Len() {
		start, ok1 := integer(s.At(i))
		end, ok2 := integer(e.At(i))
		tid, ok3 := integer(t.At(i))
		if !ok1 || !ok2 || !ok3 || end < start || tid > math.MaxUint32 {
			dst.bad(names.AttrStepLaunchStarts)
			return nil
		}
		out = append(out, Window{Start: start, End: end, ThreadID: uint32(tid)})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
