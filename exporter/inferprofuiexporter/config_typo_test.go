// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter

import (
	"path/filepath"
	"testing"

	"github.com/inferprof/inferprof/internal/confstrict/confstricttest"
)

// An unknown key fails the load and is named, at the top (beside the
// squashed confighttp server settings) and in its own sections.
func TestConfigRejectsUnknownKeys(t *testing.T) {
	confstricttest.AssertRejected(t, NewFactory(), filepath.Join("testdata", "typo.yaml"), map[string]string{
		"inferprof_ui/server":   "endpont",
		"inferprof_ui/timeline": "memory_limit",
		"inferprof_ui/tls":      "cert_fil",
	})
}
