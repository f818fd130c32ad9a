// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// The span fixtures in testdata/spans are written by the functions in
// fixtures_*_test.go with the builders of internal/spanfixture, each
// following one engine's tracing code line by line
// (the file and version are cited beside each one and in
// testdata/spans/README.md). Each file is one export batch: what one engine
// process's BatchSpanProcessor sends in one call. The SGLang ones are made
// by SGLang's own tracing code instead
// (integrations/python/tools/gen_sglang_spans.py), and TestFixtures does not cover them.
//
// Regenerate with: go test -run TestFixtures -fixtures
var writeFixtures = flag.Bool("fixtures", false, "rewrite testdata/spans/*.json from the fixture generators")

// generators are the fixture files and the functions that build them.
var generators = spanfixture.Generators{}

// TestFixtures checks that every fixture file is exactly what its generator
// makes, so a fixture cannot drift from the engine code it cites.
func TestFixtures(t *testing.T) {
	spanfixture.Check(t, generators, filepath.Join("testdata", "spans"), *writeFixtures)
}
