// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package goldentest checks a component's output spans against an expected
// file, written and read with contrib's pkg/golden and compared with
// ptracetest, the way contrib's own component tests do.
//
// What it adds is Merge: an engine's processes deliver export batches in any
// order and a processor emits a span when its join completes, so which
// batch a span leaves in is not part of the contract. Merging the batches
// into one ResourceSpans per resource and one ScopeSpans per scope, then
// comparing with the order options, checks every span whole and nothing
// about the batching.
package goldentest // import "github.com/inferprof/inferprof/internal/goldentest"

import (
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Options are the comparison's: the order of resources, scopes and spans is
// the batching's (see the package comment). Every value is compared:
// IDs, timestamps and attributes are all deterministic in our fixtures.
func Options() []ptracetest.CompareTracesOption {
	return []ptracetest.CompareTracesOption{
		ptracetest.IgnoreResourceSpansOrder(),
		ptracetest.IgnoreScopeSpansOrder(),
		ptracetest.IgnoreSpansOrder(),
	}
}

// Merge copies the spans of tds into one Traces with one ResourceSpans per
// distinct resource and one ScopeSpans per distinct scope in it, spans in
// the order they came.
func Merge(tds ...ptrace.Traces) ptrace.Traces {
	out := ptrace.NewTraces()
	type scopeKey struct {
		name, version, schema string
		attrs                 [16]byte
	}
	type resourceKey struct {
		schema string
		attrs  [16]byte
	}
	resources := map[resourceKey]ptrace.ResourceSpans{}
	scopes := map[resourceKey]map[scopeKey]ptrace.ScopeSpans{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			rk := resourceKey{rs.SchemaUrl(), pdatautil.MapHash(rs.Resource().Attributes())}
			dst, ok := resources[rk]
			if !ok {
				dst = out.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(dst.Resource())
				dst.SetSchemaUrl(rs.SchemaUrl())
				resources[rk] = dst
				scopes[rk] = map[scopeKey]ptrace.ScopeSpans{}
			}
			for _, ss := range rs.ScopeSpans().All() {
				sk := scopeKey{ss.Scope().Name(), ss.Scope().Version(), ss.SchemaUrl(), pdatautil.MapHash(ss.Scope().Attributes())}
				dss, ok := scopes[rk][sk]
				if !ok {
					dss = dst.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(dss.Scope())
					dss.SetSchemaUrl(ss.SchemaUrl())
					scopes[rk][sk] = dss
				}
				for _, s := range ss.Spans().All() {
					s.CopyTo(dss.Spans().AppendEmpty())
				}
			}
		}
	}
	return out
}

// Read reads the expected files at paths and merges them.
func Read(tb testing.TB, paths ...string) ptrace.Traces {
	tb.Helper()
	tds := make([]ptrace.Traces, 0, len(paths))
	for _, p := range paths {
		td, err := golden.ReadTraces(p)
		require.NoError(tb, err, p)
		tds = append(tds, td)
	}
	return Merge(tds...)
}

// Equal fails tb unless want and got hold the same spans (each merged
// first), every field compared.
func Equal(tb testing.TB, want, got ptrace.Traces, msgAndArgs ...any) {
	tb.Helper()
	require.NoError(tb, ptracetest.CompareTraces(Merge(want), Merge(got), Options()...), msgAndArgs...)
}

// Check compares the batches tds, merged, with the expected file at path.
// With update it first rewrites the file through golden.WriteTraces, which
// also fails the test, so that an update run is never taken for a pass:
// review the diff, then run again without it.
func Check(tb testing.TB, path string, update bool, tds ...ptrace.Traces) {
	tb.Helper()
	got := Merge(tds...)
	if update {
		require.NoError(tb, golden.WriteTraces(tb, path, got))
	}
	Equal(tb, Read(tb, path), got, "against %s", path)
}
