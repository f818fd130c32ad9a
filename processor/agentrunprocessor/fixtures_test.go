// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The span fixtures in testdata/spans are written by the functions in
// fixtures_*_test.go, each following one engine's tracing code line by line
// (the file and version are cited beside each one and in
// testdata/spans/README.md). Each file is one export batch: what one engine
// process's BatchSpanProcessor sends in one call.
// The helpers below are the inference processor's fixture helpers, copied:
// a package's tests cannot import another's.
//
// Regenerate with: go test -run TestFixtures -fixtures
var writeFixtures = flag.Bool("fixtures", false, "rewrite testdata/spans/*.json from the fixture generators")

// generators are the fixture files and the functions that build them.
var generators = map[string]func() ptrace.Traces{}

func register(name string, f func() ptrace.Traces) bool {
	generators[name] = f
	return true
}

// TestFixtures checks that every fixture file is exactly what its generator
// makes, so a fixture cannot drift from the engine code it cites.
func TestFixtures(t *testing.T) {
	names := make([]string, 0, len(generators))
	for n := range generators {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(generators[name]())
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, json.Indent(&out, b, "", " "))
		out.WriteByte('\n')
		path := filepath.Join("testdata", "spans", name+".json")
		if *writeFixtures {
			require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "fixture %s: run go test -run TestFixtures -fixtures", name)
		require.Equalf(t, out.String(), string(got), "fixture %s differs from its generator", name)
	}
}

// batch is one export batch under construction: one resource, one scope.
type batch struct {
	td    ptrace.Traces
	spans ptrace.SpanSlice
}

func newBatch(scope string, resource ...any) *batch {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	put(rs.Resource().Attributes(), resource...)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	return &batch{td: td, spans: ss.Spans()}
}

// span appends a span; ids are hex, parent may be "".
func (b *batch) span(name string, kind ptrace.SpanKind, trace, id, parent string, start, end int64) ptrace.Span {
	s := b.spans.AppendEmpty()
	s.SetName(name)
	s.SetKind(kind)
	s.SetTraceID(pcommon.TraceID(mustHex(trace, 16)))
	s.SetSpanID(pcommon.SpanID(mustHex(id, 8)))
	if parent != "" {
		s.SetParentSpanID(pcommon.SpanID(mustHex(parent, 8)))
	}
	s.SetStartTimestamp(pcommon.Timestamp(start))
	s.SetEndTimestamp(pcommon.Timestamp(end))
	return s
}

func event(s ptrace.Span, name string, ts int64, kv ...any) {
	e := s.Events().AppendEmpty()
	e.SetName(name)
	e.SetTimestamp(pcommon.Timestamp(ts))
	put(e.Attributes(), kv...)
}

// put sets alternating keys and values, in order, the way a Python dict of
// attributes (insertion-ordered) reaches the OTLP exporter.
func put(m pcommon.Map, kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case string:
			m.PutStr(k, v)
		case int:
			m.PutInt(k, int64(v))
		case int64:
			m.PutInt(k, v)
		case float64:
			m.PutDouble(k, v)
		case bool:
			m.PutBool(k, v)
		default:
			panic(fmt.Sprintf("put: %s has type %T", k, v))
		}
	}
}

func mustHex(s string, n int) []byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		panic("bad id " + s)
	}
	return b
}

// t0 is the wall-clock second all fixtures start at (2026-01-01T00:00:00Z).
const t0 = 1767225600.0

// ns is Python's int(seconds * 1e9), as the engines convert.
func ns(seconds float64) int64 { return int64(seconds * 1e9) }

func (b *batch) traces() ptrace.Traces { return b.td }
