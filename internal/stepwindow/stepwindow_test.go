// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepspan"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ms(n float64) int64 { return t0.UnixNano() + int64(n*1e6) }

func at(n float64) time.Time { return time.Unix(0, ms(n)) }

// step builds step idx ending at endMs, giving one token to each id (or the
// count after a colon, "a:3").
func step(idx uint64, startMs, endMs float64, ids ...string) *Step {
	s := &Step{Source: 1, Index: idx, StartUnixNs: ms(startMs), EndUnixNs: ms(endMs)}
	for _, id := range ids {
		n := int64(1)
		for i := range id {
			if id[i] == ':' {
				v, _ := strconv.Atoi(id[i+1:])
				id, n = id[:i], int64(v)
				break
			}
		}
		s.RequestIDs = append(s.RequestIDs, id)
		s.RequestTokens = append(s.RequestTokens, n)
	}
	return s
}

func TestLookupRebuildsGaps(t *testing.T) {
	t.Parallel()
	w := New(Config{StallFactor: 3})
	w.Add("svc", step(1, 0, 10, "a"))        // prefill: first token at 10 ms
	w.Add("svc", step(2, 10, 20, "a", "b"))  // gap 10
	w.Add("svc", step(3, 20, 30, "a:3"))     // gap 10, speculative: 3 tokens
	w.Add("svc", step(4, 30, 40, "b"))       // a gets nothing
	w.Add("svc", step(5, 40, 100, "a", "b")) // gap 70: a stall
	w.Add("svc", step(6, 100, 110, "a"))     // gap 10

	r := w.Lookup("svc", "a", at(-5), at(120))
	require.Equal(t, StatusOK, r.Status)
	assert.InDeltaSlice(t, []float64{0.010, 0.010, 0.070, 0.010}, r.Gaps, 1e-12)
	assert.Equal(t, 7, r.Tokens)
	assert.Equal(t, 5, r.TokenSteps)
	assert.Equal(t, 4, r.DecodeSteps)
	assert.InDelta(t, 0.010, r.P50, 1e-12)
	assert.InDelta(t, 0.070, r.P99, 1e-12)
	assert.InDelta(t, 0.070, r.Max, 1e-12)
	assert.Equal(t, 1, r.Stalls)

	r = w.Lookup("svc", "b", at(5), time.Time{})
	require.Equal(t, StatusOK, r.Status)
	assert.InDeltaSlice(t, []float64{0.020, 0.060}, r.Gaps, 1e-12)
	assert.Equal(t, 0, r.Stalls, "no gap is above 3x the median")
}

func TestLookupStatuses(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	w.Add("svc", step(1, 0, 10, "a"))
	assert.Equal(t, StatusUnknownInstance, w.Lookup("other", "a", at(0), at(20)).Status)
	assert.Equal(t, StatusNoSteps, w.Lookup("svc", "zzz", at(0), at(20)).Status)
	r := w.Lookup("svc", "a", at(0), at(20))
	assert.Equal(t, StatusOK, r.Status)
	assert.Empty(t, r.Gaps, "one token step has no gap")
	assert.Zero(t, r.P50)
	assert.Equal(t, "evicted", StatusEvicted.String())
}

func TestEvictedByAgeSaysSo(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxAge: 100 * time.Millisecond})
	w.Add("svc", step(1, 0, 10, "old"))
	w.Add("svc", step(2, 10, 20, "old", "new"))
	w.Add("svc", step(3, 20, 30, "new"))
	w.Add("svc", step(4, 100, 115, "new")) // evicts step 1 (ended 105 ms before)

	assert.Equal(t, StatusEvicted, w.Lookup("svc", "old", at(-1), at(30)).Status,
		"steps from the request's life left the window")
	r := w.Lookup("svc", "new", at(15), at(130))
	assert.Equal(t, StatusOK, r.Status, "arrived after the newest evicted step ended")
	assert.InDeltaSlice(t, []float64{0.010, 0.085}, r.Gaps, 1e-12)
	s := w.Stats()
	assert.Equal(t, uint64(1), s.EvictedSteps)
	assert.Equal(t, 3, s.Steps)
	assert.Equal(t, 4, s.Records)
}

func TestEvictedBySizeAcrossInstances(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxRecords: 4})
	w.Add("a", step(1, 0, 10, "x", "y"))
	w.Add("b", step(1, 5, 15, "z"))
	w.Add("a", step(2, 10, 20, "x", "y")) // 5 records: the oldest step (a#1) goes
	s := w.Stats()
	assert.Equal(t, 3, s.Records)
	assert.Equal(t, uint64(1), s.EvictedSteps)
	assert.Equal(t, StatusEvicted, w.Lookup("a", "x", at(0), at(30)).Status)
	assert.Equal(t, StatusOK, w.Lookup("b", "z", at(0), at(30)).Status)
}

func TestRingWrapKeepsLookupsRight(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxSteps: 8})
	for i := uint64(1); i <= 30; i++ {
		w.Add("svc", step(i, float64(i*10-10), float64(i*10), "r"+strconv.FormatUint(i/4, 10)))
	}
	// r7 got tokens in steps 28, 29, 30; the window holds steps 23..30.
	r := w.Lookup("svc", "r7", at(275), at(400))
	require.Equal(t, StatusOK, r.Status)
	assert.InDeltaSlice(t, []float64{0.010, 0.010}, r.Gaps, 1e-12)
	assert.Equal(t, 8, w.Stats().Steps)
	assert.Equal(t, 8, w.Stats().Records, "records of evicted steps are freed")
}

func TestLostAndTruncatedStepsMakeRequestsIncomplete(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	w.Add("svc", step(1, 0, 10, "a", "early"))
	w.Add("svc", step(2, 10, 20, "a", "early"))
	w.Add("svc", step(5, 50, 60, "a", "late")) // steps 3 and 4 were dropped
	w.Add("svc", step(6, 60, 70, "late"))
	tr := step(7, 80, 90, "t")
	tr.Truncated = true
	w.Add("svc", tr)

	assert.Equal(t, StatusIncomplete, w.Lookup("svc", "a", at(0), at(65)).Status)
	assert.Equal(t, StatusOK, w.Lookup("svc", "early", at(0), at(19)).Status,
		"finished before the lost steps")
	assert.Equal(t, StatusOK, w.Lookup("svc", "late", at(61), at(75)).Status,
		"arrived after the lost steps and ended before the truncated one")
	assert.Equal(t, StatusIncomplete, w.Lookup("svc", "t", at(79), at(95)).Status)
}

func TestStepsBeforeTheWindowStartedAreNotGuessed(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	w.Add("svc", step(41, 400, 410, "old", "new")) // the hook ran before the collector
	w.Add("svc", step(42, 410, 420, "old", "new"))
	assert.Equal(t, StatusEvicted, w.Lookup("svc", "old", at(300), at(430)).Status,
		"steps 1..40 were never seen")
	assert.Equal(t, StatusOK, w.Lookup("svc", "new", at(401), at(430)).Status)

	fresh := New(Config{})
	fresh.Add("svc", step(1, 5, 10, "a")) // a source seen from its first step
	fresh.Add("svc", step(2, 10, 20, "a"))
	assert.Equal(t, StatusOK, fresh.Lookup("svc", "a", at(0), at(30)).Status)
}

// fromSource is step with another source.
func fromSource(src uint64, st *Step) *Step {
	st.Source = src
	return st
}

// TestSourcesArePruned: a source whose last step left the window is
// forgotten when a new source appears, so engine restarts (new pids) do not
// pile up; it is not counted as an eviction.
func TestSourcesArePruned(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxAge: 100 * time.Millisecond})
	w.Add("svc", fromSource(1, step(1, 0, 10, "a")))
	for i := uint64(1); i <= 30; i++ {
		w.Add("svc", fromSource(2, step(i, float64(10*i), float64(10*i+10), "b")))
	}
	assert.Equal(t, 2, w.Stats().Sources, "nothing new yet")
	w.Add("svc", fromSource(3, step(1, 310, 320, "c")))
	s := w.Stats()
	assert.Equal(t, 2, s.Sources, "source 1 went with its last step")
	assert.Zero(t, s.EvictedSources)
}

// TestSourcesAreCappedAndCounted: past MaxSources live sources, the one
// heard least recently is forgotten and counted.
func TestSourcesAreCappedAndCounted(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxSources: 2})
	w.Add("svc", fromSource(1, step(1, 0, 10, "a")))
	w.Add("svc", fromSource(2, step(1, 5, 15, "b")))
	w.Add("svc", fromSource(1, step(2, 10, 20, "a")))
	w.Add("svc", fromSource(3, step(1, 12, 22, "c")))
	s := w.Stats()
	assert.Equal(t, 2, s.Sources)
	assert.Equal(t, uint64(1), s.EvictedSources)
	// Source 2 (heard least recently) was the one forgotten: its next step
	// is new again, while source 1 is still followed step by step.
	w.Add("svc", fromSource(1, step(2, 10, 20, "a")))
	assert.Equal(t, 4, w.Stats().Steps, "a duplicate of a remembered source is dropped")
}

// TestForgottenSourceDoesNotEvictOthers: a data-parallel engine that sat
// idle past the window and was forgotten comes back; requests the other
// engines served meanwhile keep their figures.
func TestForgottenSourceDoesNotEvictOthers(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxAge: 100 * time.Millisecond})
	w.Add("svc", fromSource(1, step(1, 0, 10, "a")))
	for i := uint64(1); i <= 80; i++ {
		w.Add("svc", fromSource(2, step(i, float64(10*i), float64(10*i+10), "r")))
	}
	w.Add("svc", fromSource(3, step(1, 810, 820, "c"))) // forgets source 1
	w.Add("svc", fromSource(1, step(2, 830, 840, "a2")))
	w.Add("svc", fromSource(2, step(81, 820, 850, "r2")))
	w.Add("svc", fromSource(2, step(82, 850, 860, "r2")))
	assert.Equal(t, StatusOK, w.Lookup("svc", "r2", at(805), at(870)).Status)
}

func TestLateAndDuplicateStepsAreDropped(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	w.Add("svc", step(2, 10, 20, "a"))
	w.Add("svc", step(2, 10, 20, "a"))
	w.Add("svc", step(1, 0, 10, "a"))
	assert.Equal(t, 1, w.Stats().Steps)
	other := step(1, 0, 15, "b")
	other.Source = 2 // another data-parallel engine of the same server
	w.Add("svc", other)
	assert.Equal(t, 2, w.Stats().Steps)
}

func TestInstancesAreCapped(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxInstances: 2})
	w.Add("a", step(1, 0, 10, "x"))
	w.Add("b", step(1, 0, 10, "x"))
	w.Add("a", step(2, 10, 20, "x"))
	w.Add("c", step(1, 0, 10, "x")) // b is least recently updated
	s := w.Stats()
	assert.Equal(t, 2, s.Instances)
	assert.Equal(t, uint64(1), s.EvictedInstances)
	assert.Equal(t, 3, s.Records)
	assert.Equal(t, StatusUnknownInstance, w.Lookup("b", "x", at(0), at(10)).Status)
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxRecords: 1000})
	var wg sync.WaitGroup
	for g := range 4 {
		key := "svc" + strconv.Itoa(g)
		wg.Go(func() {
			for i := uint64(1); i <= 500; i++ {
				w.Add(key, step(i, float64(i), float64(i+1), "a", "b"))
				w.Lookup(key, "a", at(0), at(1000))
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, w.Stats().Records, 1000)
}

// engineStepSpan builds a span the way the engine_step receiver does.
func engineStepSpan(tb testing.TB) ptrace.Traces {
	tb.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr(names.ResourceServiceName, "vllm-a")
	ra.PutStr(names.ResourceHostName, "h1")
	ra.PutInt(names.ResourceProcessPID, 42)
	ra.PutInt(names.ResourceEngineIndex, 0)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName(names.SpanEngineStep)
	sp.SetStartTimestamp(pcommon.Timestamp(ms(0)))
	sp.SetEndTimestamp(pcommon.Timestamp(ms(12)))
	a := sp.Attributes()
	a.PutInt(names.AttrStepIndex, 9)
	ids := a.PutEmptySlice(names.AttrStepRequestIDs)
	ids.AppendEmpty().SetStr("r1")
	ids.AppendEmpty().SetStr("r2")
	toks := a.PutEmptySlice(names.AttrStepRequestTokens)
	toks.AppendEmpty().SetInt(1)
	toks.AppendEmpty().SetInt(4)
	return td
}

// fromSpan reads a span as the processor does: stepspan, then FromStep.
func fromSpan(sp ptrace.Span, res pcommon.Resource, dst *Step) (string, bool) {
	var st stepspan.Step
	if !stepspan.Read(sp, &st, stepspan.Requests) {
		return "", false
	}
	return FromStep(&st, res, dst), true
}

func TestFromSpan(t *testing.T) {
	t.Parallel()
	td := engineStepSpan(t)
	rs := td.ResourceSpans().At(0)
	sp := rs.ScopeSpans().At(0).Spans().At(0)
	var s Step
	key, ok := fromSpan(sp, rs.Resource(), &s)
	require.True(t, ok)
	assert.Equal(t, "vllm-a", key, "no service.instance.id: the service.name")
	assert.NotZero(t, s.Engine)
	assert.Equal(t, uint64(9), s.Index)
	assert.Equal(t, ms(0), s.StartUnixNs)
	assert.Equal(t, ms(12), s.EndUnixNs)
	assert.Equal(t, []string{"r1", "r2"}, s.RequestIDs)
	assert.Equal(t, []int64{1, 4}, s.RequestTokens)
	assert.False(t, s.Truncated)
	assert.NotZero(t, s.Source)

	other := ptrace.NewSpan()
	other.SetName("llm_request")
	_, ok = fromSpan(other, rs.Resource(), &s)
	assert.False(t, ok)

	// The receiver's stand-in for a hook without an instance id names the
	// process, not the server: the key leaves it out.
	rs.Resource().Attributes().PutStr(names.ResourceServiceInstance, "h1/42/0")
	key, _ = fromSpan(sp, rs.Resource(), &s)
	assert.Equal(t, "vllm-a", key)
	assert.Equal(t, key, InstanceKey(rs.Resource()), "steps and requests share the key")
	rs.Resource().Attributes().PutStr(names.ResourceServiceInstance, "h1/42/1")
	key, _ = fromSpan(sp, rs.Resource(), &s)
	assert.Equal(t, "vllm-a [h1/42/1]", key, "another engine index: a real id")
	rs.Resource().Attributes().PutStr(names.ResourceServiceInstance, "5b0e5d2c")
	engine := s.Engine
	key, _ = fromSpan(sp, rs.Resource(), &s)
	assert.Equal(t, "vllm-a [5b0e5d2c]", key)
	assert.Equal(t, engine, s.Engine, "the engine is its host and index")
	id, svc := splitKey(key)
	assert.Equal(t, [2]string{"5b0e5d2c", "vllm-a"}, [2]string{id, svc})
	id, svc = splitKey("odd [name")
	assert.Equal(t, [2]string{"", "odd [name"}, [2]string{id, svc})

	// A request span: the engine's SDK puts the launcher's id on it.
	res := pcommon.NewResource()
	res.Attributes().PutStr(names.ResourceServiceName, "vllm-a")
	res.Attributes().PutStr(names.ResourceServiceInstance, "5b0e5d2c")
	assert.Equal(t, key, InstanceKey(res))
}

// TestMemoryBounded streams far more records than the cap through the window
// and checks that what it keeps, and the heap, stay bounded.
func TestMemoryBounded(t *testing.T) {
	const concurrent, perStep, maxRecords = 2000, 2000, 100_000
	w := New(Config{MaxRecords: maxRecords})
	ids := make([]string, 0, concurrent*4)
	gen := 0
	cur := make([]string, concurrent)
	for i := range cur {
		cur[i] = "req-" + strconv.Itoa(gen)
		gen++
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := &Step{Source: 1}
	for i := uint64(1); i <= 600; i++ {
		s.Index = i
		s.StartUnixNs = ms(float64(i-1) * 10)
		s.EndUnixNs = ms(float64(i) * 10)
		s.RequestIDs = s.RequestIDs[:0]
		s.RequestTokens = s.RequestTokens[:0]
		for j := range perStep {
			// Every request lives 200 steps, then a new one takes its place.
			if (int(i)+j)%200 == 0 {
				cur[j] = "req-" + strconv.Itoa(gen)
				gen++
			}
			s.RequestIDs = append(s.RequestIDs, cur[j])
			s.RequestTokens = append(s.RequestTokens, 1)
		}
		w.Add("svc", s)
	}
	_ = ids
	st := w.Stats()
	assert.LessOrEqual(t, st.Records, maxRecords)
	assert.Positive(t, st.EvictedSteps)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// 40 bytes a record plus a track per request is the budget; allow 2x.
	budget := int64(maxRecords*40+concurrent*200) * 2
	assert.Less(t, grown, budget, "heap grew %d bytes", grown)
}

// BenchmarkWindow feeds 100 steps a second from 10,000 concurrent requests,
// each getting a token per step and living 200 steps (2 s), and reports the
// heap the window holds per concurrent request. impl=ours has the default
// bounds; impl=baseline is an unbounded window. Both first run 500 steps, past
// the point where the default MaxRecords starts evicting, so the figures are
// steady state for ours and still growing for the baseline.
func BenchmarkWindow(b *testing.B) {
	const concurrent, warmup = 10_000, 500
	for _, impl := range []struct {
		name string
		cfg  Config
	}{
		{"ours", NewDefaultConfig()},
		{"baseline", Config{MaxAge: time.Hour, MaxSteps: 1 << 30, MaxRecords: 1 << 40}},
	} {
		b.Run(fmt.Sprintf("impl=%s/requests=%d", impl.name, concurrent), func(b *testing.B) {
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			w := New(impl.cfg)
			cur := make([]string, concurrent)
			gen := 0
			for i := range cur {
				cur[i] = "chatcmpl-" + strconv.Itoa(gen)
				gen++
			}
			s := &Step{Source: 1, RequestIDs: make([]string, concurrent), RequestTokens: make([]int64, concurrent)}
			var i uint64
			next := func() {
				i++
				s.Index = i
				s.StartUnixNs = ms(float64(i-1) * 10)
				s.EndUnixNs = ms(float64(i) * 10)
				for j := range concurrent {
					if (int(i)+j)%200 == 0 {
						cur[j] = "chatcmpl-" + strconv.Itoa(gen)
						gen++
					}
					s.RequestIDs[j] = cur[j]
					s.RequestTokens[j] = 1
				}
				w.Add("svc", s)
			}
			for range warmup {
				next()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				next()
			}
			b.StopTimer()
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			st := w.Stats()
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/concurrent, "heapB/request")
			b.ReportMetric(float64(st.Records), "records")
			b.ReportMetric(float64(st.Records)/concurrent/100, "window-s")
			runtime.KeepAlive(w)
		})
	}
}

// BenchmarkLookup measures rebuilding one request's ITL from 1,000 steps.
func BenchmarkLookup(b *testing.B) {
	w := New(Config{})
	for i := uint64(1); i <= 1000; i++ {
		w.Add("svc", step(i, float64(i-1)*10, float64(i)*10, "a", "b", "c"))
	}
	b.ReportAllocs()
	for b.Loop() {
		r := w.Lookup("svc", "b", at(-1), at(20000))
		if r.DecodeSteps != 999 {
			b.Fatal(r.DecodeSteps)
		}
	}
}
