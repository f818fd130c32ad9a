// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package requestguardextension

import (
	"path/filepath"
	"testing"

	"github.com/inferprof/inferprof/internal/confstrict/confstricttest"
)

// An unknown key fails the load and is named: a typo or a renamed key is
// never silently dropped (issue #28 item 6).
func TestConfigRejectsUnknownKeys(t *testing.T) {
	confstricttest.AssertRejected(t, NewFactory(), filepath.Join("testdata", "typo.yaml"), map[string]string{
		"request_guard/top": "maxdepth",
	})
}
