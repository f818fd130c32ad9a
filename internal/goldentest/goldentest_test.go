// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package goldentest

import (
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// batch is one export batch of one span per name, on resource host.
func batch(host string, names ...string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("host.name", host)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm")
	for _, n := range names {
		s := ss.Spans().AppendEmpty()
		s.SetName(n)
		s.SetTraceID(pcommon.TraceID{0: 1})
		s.SetSpanID(pcommon.SpanID{0: byte(len(n)), 1: n[0]})
		s.Attributes().PutDouble("gen_ai.latency.e2e", float64(len(n)))
	}
	return td
}

func TestMergeGroupsByResourceAndScope(t *testing.T) {
	got := Merge(batch("a", "x"), batch("b", "y"), batch("a", "z"))
	require.Equal(t, 2, got.ResourceSpans().Len())
	a := got.ResourceSpans().At(0)
	host, _ := a.Resource().Attributes().Get("host.name")
	assert.Equal(t, "a", host.Str())
	require.Equal(t, 1, a.ScopeSpans().Len())
	require.Equal(t, 2, a.ScopeSpans().At(0).Spans().Len())
	assert.Equal(t, "x", a.ScopeSpans().At(0).Spans().At(0).Name())
	assert.Equal(t, "z", a.ScopeSpans().At(0).Spans().At(1).Name())
	assert.Equal(t, 3, got.SpanCount())

	// Another scope on the same resource stays apart.
	other := batch("a", "w")
	other.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetName("sglang")
	got = Merge(batch("a", "x"), other)
	require.Equal(t, 1, got.ResourceSpans().Len())
	assert.Equal(t, 2, got.ResourceSpans().At(0).ScopeSpans().Len())
}

func TestEqualIgnoresOnlyBatching(t *testing.T) {
	want := Merge(batch("a", "x", "yy"), batch("b", "z"))
	// The same spans, in other batches and another order, match.
	Equal(t, want, Merge(batch("b", "z"), batch("a", "yy"), batch("a", "x")))

	// A changed figure does not.
	changed := batch("a", "x", "yy")
	changed.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Attributes().PutDouble("gen_ai.latency.e2e", 3)
	require.Error(t, ptracetest.CompareTraces(want, Merge(changed, batch("b", "z")), Options()...))
	// Nor does a missing span, or one on another resource.
	require.Error(t, ptracetest.CompareTraces(want, Merge(batch("a", "x"), batch("b", "z")), Options()...))
	require.Error(t, ptracetest.CompareTraces(want, Merge(batch("a", "x", "yy"), batch("c", "z")), Options()...))
}

func TestCheckRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "expected.yaml")
	in := []ptrace.Traces{batch("a", "x", "yy"), batch("b", "z")}
	// The update run writes the file and fails (golden.WriteTraces' guard).
	ft := &failRecorder{TB: t}
	Check(ft, path, true, in...)
	assert.True(t, ft.failed, "an update run is not a pass")
	// Then the file matches, read back through pkg/golden.
	Check(t, path, false, in...)
	assert.Equal(t, 3, Read(t, path).SpanCount())
}

// failRecorder records Fail instead of failing the test it wraps, to see
// golden.WriteTraces' guard.
type failRecorder struct {
	testing.TB
	failed bool
}

func (f *failRecorder) Fail() { f.failed = true }
