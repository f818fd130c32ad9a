// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepspan

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// FuzzRead reads every span of an OTLP trace body, as the collector would
// receive it, named engine.step: whatever the attributes hold, Read keeps
// its rule (no panic; counts and ids valid or Absent, windows ordered, ids
// and tokens never misaligned). Seeds: testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			return
		}
		var st Step
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					sp.SetName(names.SpanEngineStep)
					if !Read(sp, &st, All) {
						t.Fatal("an engine.step span was not read")
					}
					for _, v := range []int64{st.Index, st.Batch, st.ThreadID, st.ScheduledTokens, st.PrefillRequests,
						st.DecodeRequests, st.RunningRequests, st.WaitingRequests, st.Preempted} {
						if v < Absent {
							t.Fatalf("count %d", v)
						}
					}
					if st.KVCacheUsage < 0 || math.IsInf(st.KVCacheUsage, 0) {
						t.Fatalf("kv usage %v", st.KVCacheUsage)
					}
					for _, n := range st.RequestTokens {
						if n < 0 {
							t.Fatalf("tokens %d", n)
						}
					}
					for _, w := range st.Windows {
						if w.End < w.Start {
							t.Fatalf("window %+v", w)
						}
					}
					if st.Bad == 0 && st.BadKey != "" || st.Bad > 0 && st.BadKey == "" {
						t.Fatalf("bad %d key %q", st.Bad, st.BadKey)
					}
				}
			}
		}
	})
}
