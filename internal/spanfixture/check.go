// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package spanfixture

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Generators are a package's fixture files, by name without ".json", and
// the functions that build them.
type Generators map[string]func() ptrace.Traces

// Register adds a generator. It returns true so that generators can be
// registered beside their code as package-level `var _ = gens.Register(…)`.
// A name registered twice panics: the second would silently replace the first.
func (g Generators) Register(name string, f func() ptrace.Traces) bool {
	if _, ok := g[name]; ok {
		panic("spanfixture: fixture " + name + " registered twice")
	}
	g[name] = f
	return true
}

// TestingT is what Check needs of a test; *testing.T has it.
type TestingT interface {
	require.TestingT
	Helper()
}

// Check asserts that every file dir/NAME.json is exactly what generator
// NAME makes (OTLP/JSON, indented one space, a final newline), so a fixture
// cannot drift from the engine code its generator cites. With write it
// first rewrites each file from its generator.
func Check(t TestingT, gens Generators, dir string, write bool) {
	t.Helper()
	names := make([]string, 0, len(gens))
	for n := range gens {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want, err := Marshal(gens[name]())
		require.NoError(t, err, "fixture %s", name)
		path := filepath.Join(dir, name+".json")
		if write {
			require.NoError(t, os.WriteFile(path, want, 0o600))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "fixture %s: run go test -run TestFixtures -fixtures", name)
		require.Equalf(t, string(want), string(got), "fixture %s differs from its generator", name)
	}
}

// Marshal is the bytes of a fixture file: td as OTLP/JSON, indented one
// space, with a final newline.
func Marshal(td ptrace.Traces) ([]byte, error) {
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", " "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
