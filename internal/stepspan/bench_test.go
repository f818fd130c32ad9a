// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepspan

import (
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// benchStep is an engine.step span as the engine_step receiver makes it
// (wire version 4, 16 requests).
func benchStep() ptrace.Span {
	s := ptrace.NewSpan()
	s.SetName(names.SpanEngineStep)
	s.SetStartTimestamp(1_700_000_000_000_000_000)
	s.SetEndTimestamp(1_700_000_000_004_000_000)
	a := s.Attributes()
	a.PutInt(names.AttrStepIndex, 41)
	a.PutInt(names.AttrStepBatch, 41)
	a.PutInt(names.AttrThreadID, 4242)
	a.PutInt(names.AttrStepPrefillReqs, 1)
	a.PutInt(names.AttrStepDecodeReqs, 15)
	a.PutInt(names.AttrStepScheduledToks, 512)
	a.PutInt(names.AttrStepRunningReqs, 16)
	a.PutInt(names.AttrStepWaitingReqs, 2)
	a.PutDouble(names.AttrStepKVCacheUsage, 0.4)
	a.PutBool(names.AttrStepIDsTruncated, false)
	ids, toks := a.PutEmptySlice(names.AttrStepRequestIDs), a.PutEmptySlice(names.AttrStepRequestTokens)
	for r := range 16 {
		ids.AppendEmpty().SetStr("req-" + strconv.Itoa(r))
		toks.AppendEmpty().SetInt(1)
	}
	a.PutEmptySlice(names.AttrStepLaunchStarts).AppendEmpty().SetInt(1_700_000_000_000_100_000)
	a.PutEmptySlice(names.AttrStepLaunchEnds).AppendEmpty().SetInt(1_700_000_000_003_000_000)
	a.PutEmptySlice(names.AttrStepLaunchThreads).AppendEmpty().SetInt(4242)
	return s
}

// The reads the inference processor made per step before stepspan, as
// baseline: stepwindow.FromSpan's (index, truncated flag, ids, tokens) and
// the GPU join's (index, thread, batch, scheduled tokens, launch windows),
// one map lookup each.
type oldStep struct {
	index, thread, batch, sched int64
	truncated                   bool
	ids                         []string
	toks                        []int64
	starts, ends, threads       []int64
}

func oldRead(span ptrace.Span, dst *oldStep) {
	a := span.Attributes()
	getInt := func(k string) int64 {
		if v, ok := a.Get(k); ok {
			return v.Int()
		}
		return 0
	}
	ints := func(k string, out []int64) []int64 {
		if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeSlice {
			for _, e := range v.Slice().All() {
				out = append(out, e.Int())
			}
		}
		return out
	}
	dst.index = getInt(names.AttrStepIndex)
	if v, ok := a.Get(names.AttrStepIDsTruncated); ok {
		dst.truncated = v.Bool()
	}
	dst.ids = dst.ids[:0]
	if v, ok := a.Get(names.AttrStepRequestIDs); ok && v.Type() == pcommon.ValueTypeSlice {
		for _, e := range v.Slice().All() {
			dst.ids = append(dst.ids, e.Str())
		}
	}
	dst.toks = ints(names.AttrStepRequestTokens, dst.toks[:0])
	dst.index = getInt(names.AttrStepIndex) // the GPU join read it again
	dst.thread = getInt(names.AttrThreadID)
	dst.batch = getInt(names.AttrStepBatch)
	dst.sched = getInt(names.AttrStepScheduledToks)
	dst.starts = ints(names.AttrStepLaunchStarts, dst.starts[:0])
	dst.ends = ints(names.AttrStepLaunchEnds, dst.ends[:0])
	dst.threads = ints(names.AttrStepLaunchThreads, dst.threads[:0])
}

// BenchmarkRead holds Read (every field, checked) against the processor's
// former per-step reads, in one run: go test -bench Read -count 10, then
// benchstat -col /impl.
func BenchmarkRead(b *testing.B) {
	span := benchStep()
	b.Run("impl=former_reads", func(b *testing.B) {
		var st oldStep
		b.ReportAllocs()
		for b.Loop() {
			oldRead(span, &st)
		}
	})
	b.Run("impl=stepspan", func(b *testing.B) {
		var st Step
		b.ReportAllocs()
		for b.Loop() {
			Read(span, &st, Requests|Launch) // what the processor reads
		}
	})
}
