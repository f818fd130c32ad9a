// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e holds the end-to-end tests: each starts the built
// otelcol-inferprof binary on free loopback ports and talks to it with real
// OTLP clients and servers.
package e2e

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Builds are slow and the binary is not race-instrumented; `make test`
	// builds it once and passes its path in INFERPROF_BIN.
	os.Exit(m.Run())
}
