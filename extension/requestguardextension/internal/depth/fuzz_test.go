// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package depth

import (
	"errors"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// FuzzProto checks that the scan never fails on any input, and that a body
// it passes at a limit pdata's stack survives is one pdata decodes without
// overflowing: pdata is the oracle for the depth of what it accepts.
// The seed corpus in testdata/fuzz/FuzzProto holds nested AnyValue bodies.
func FuzzProto(f *testing.F) {
	f.Add(deepArrays(3))
	f.Add(deepArrays(70))
	f.Add([]byte{0x0a, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Proto(b, 64)
		if err != nil && !errors.Is(err, ErrTooDeep) {
			t.Fatalf("unexpected error %v", err)
		}
		if err == nil {
			// Passed the scan: pdata decodes or refuses it, never overflows.
			_ = ptraceotlp.NewExportRequest().UnmarshalProto(b)
		}
		if err := Proto(b, 1<<20); err != nil {
			t.Fatalf("a limit above any possible depth refused: %v", err)
		}
	})
}

// FuzzJSON does the same for OTLP/JSON.
func FuzzJSON(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}}]}]}]}]}`))
	f.Add([]byte(`{"a":"\"{{{{"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := JSON(b, 64)
		if err != nil && !errors.Is(err, ErrTooDeep) {
			t.Fatalf("unexpected error %v", err)
		}
		if err == nil {
			_ = ptraceotlp.NewExportRequest().UnmarshalJSON(b)
		}
	})
}
