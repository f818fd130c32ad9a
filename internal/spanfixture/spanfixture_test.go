// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package spanfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// recorder is a TestingT that keeps Check's failure instead of failing the
// test, so the tests can see that Check fails when it should.
type recorder struct {
	msgs   []string
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) FailNow() {
	r.failed = true
	runtime.Goexit()
}

// check runs Check on a recorder; FailNow ends only Check's goroutine.
func check(gens Generators, dir string, write bool) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, gens, dir, write)
	}()
	<-done
	return r
}

func oneSpan() ptrace.Traces {
	b := NewBatch("scope", "service.name", "svc")
	s := b.Span("op", ptrace.SpanKindServer, "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "", NS(T0), NS(T0+1))
	Event(s, "e", NS(T0+0.5), "k", 1)
	return b.Traces()
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	gens := Generators{}
	require.True(t, gens.Register("one", oneSpan))

	r := check(gens, dir, false)
	require.True(t, r.failed, "a missing file fails")
	assert.Contains(t, strings.Join(r.msgs, "\n"), "run go test -run TestFixtures -fixtures")

	r = check(gens, dir, true)
	require.False(t, r.failed, "%v", r.msgs)
	got, err := os.ReadFile(filepath.Join(dir, "one.json"))
	require.NoError(t, err)
	want, err := Marshal(oneSpan())
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	assert.True(t, strings.HasSuffix(string(got), "}\n"), "ends in one newline")
	assert.Contains(t, string(got), "\n \"resourceSpans\"", "indented one space")
	back, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(got)
	require.NoError(t, err)
	assert.Equal(t, 1, back.SpanCount())

	require.False(t, check(gens, dir, false).failed, "an unchanged file passes")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "one.json"), []byte(strings.Replace(string(got), `"op"`, `"op2"`, 1)), 0o600))
	r = check(gens, dir, false)
	require.True(t, r.failed, "an edited file fails")
	assert.Contains(t, strings.Join(r.msgs, "\n"), "fixture one differs from its generator")
}

func TestRegisterTwice(t *testing.T) {
	gens := Generators{}
	gens.Register("one", oneSpan)
	assert.PanicsWithValue(t, "spanfixture: fixture one registered twice", func() { gens.Register("one", oneSpan) })
}

func TestPut(t *testing.T) {
	m := pcommon.NewMap()
	Put(m, "s", "v", "i", 3, "i64", int64(4), "f", 0.5, "b", true)
	var keys []string
	m.Range(func(k string, _ pcommon.Value) bool {
		keys = append(keys, k)
		return true
	})
	assert.Equal(t, []string{"s", "i", "i64", "f", "b"}, keys, "in the order given, as a Python dict")
	assert.Equal(t, pcommon.ValueTypeInt, mustGet(t, m, "i").Type())
	assert.Equal(t, pcommon.ValueTypeDouble, mustGet(t, m, "f").Type())
	assert.Panics(t, func() { Put(m, "u", uint8(1)) }, "a type OTLP-from-Python cannot have")
}

func mustGet(t *testing.T, m pcommon.Map, k string) pcommon.Value {
	t.Helper()
	v, ok := m.Get(k)
	require.True(t, ok, k)
	return v
}

func TestSpan(t *testing.T) {
	b := NewBatch("scope")
	s := b.Span("op", ptrace.SpanKindClient, "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "", 1, 2)
	assert.True(t, s.ParentSpanID().IsEmpty())
	c := b.Span("child", ptrace.SpanKindInternal, "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b175", "eee19b7ec3c1b174", 1, 2)
	assert.Equal(t, s.SpanID(), c.ParentSpanID())
	assert.Equal(t, 2, b.Len())
	assert.Panics(t, func() { b.Span("x", ptrace.SpanKindInternal, "5b8e", "eee19b7ec3c1b174", "", 1, 2) }, "a short trace id")
	assert.Panics(t, func() { b.Span("x", ptrace.SpanKindInternal, "5b8efff798038103d269b633813fc60c", "not hex!", "", 1, 2) })
}

// DoTracing's figures are do_tracing's differences of the stats, and the
// request parameters appear only when truthy.
func TestDoTracing(t *testing.T) {
	st := VLLMStats{Arrival: T0, Queued: 100, Scheduled: 100.25, FirstToken: 100.75, LastToken: 102, FirstTokenLatency: 0.8, Generated: 9}
	r := VLLMRequest{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b174", ExternalReqID: "cmpl-1",
		PromptLen: 7, Finish: "stop", TopP: 0.5, N: 1, IterationStamp: T0 + 3, EndDelay: 0.25}
	s := VLLMExport().DoTracing(st, r)
	a := s.Attributes()
	assert.InDelta(t, r.IterationStamp-st.Arrival, mustGet(t, a, "gen_ai.latency.e2e").Double(), 0)
	assert.InDelta(t, st.Scheduled-st.Queued, mustGet(t, a, "gen_ai.latency.time_in_queue").Double(), 0)
	assert.InDelta(t, st.FirstToken-st.Scheduled, mustGet(t, a, "gen_ai.latency.time_in_model_prefill").Double(), 0)
	assert.InDelta(t, st.LastToken-st.FirstToken, mustGet(t, a, "gen_ai.latency.time_in_model_decode").Double(), 0)
	assert.InDelta(t, st.LastToken-st.Scheduled, mustGet(t, a, "gen_ai.latency.time_in_model_inference").Double(), 0)
	assert.Equal(t, `["stop"]`, mustGet(t, a, "gen_ai.response.finish_reasons").Str())
	assert.Equal(t, pcommon.Timestamp(NS(st.Arrival)), s.StartTimestamp())
	assert.Equal(t, pcommon.Timestamp(NS(r.IterationStamp+r.EndDelay)), s.EndTimestamp())
	_, hasTemp := a.Get("gen_ai.request.temperature")
	_, hasMax := a.Get("gen_ai.request.max_tokens")
	assert.False(t, hasTemp || hasMax, "0 is falsy: left out")
	assert.Equal(t, ptrace.StatusCodeUnset, s.Status().Code())
	assert.Equal(t, 0, s.Events().Len())

	r.ErrorType, r.Error = "E", "boom"
	s = VLLMExport().DoTracing(st, r)
	assert.Equal(t, ptrace.StatusCodeError, s.Status().Code())
	assert.Equal(t, "E: boom", s.Status().Message())
	require.Equal(t, 1, s.Events().Len())
	assert.Equal(t, "exception", s.Events().At(0).Name())
}
