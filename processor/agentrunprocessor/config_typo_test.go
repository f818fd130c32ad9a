// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"path/filepath"
	"testing"

	"github.com/inferprof/inferprof/internal/confstrict/confstricttest"
)

// An unknown key fails the load and is named: a typo or a renamed key is
// never silently dropped (issue #28 item 6).
func TestConfigRejectsUnknownKeys(t *testing.T) {
	confstricttest.AssertRejected(t, NewFactory(), filepath.Join("testdata", "typo.yaml"), map[string]string{
		"agent_run/top":    "price",
		"agent_run/agents": "max_span_per_trace",
		"agent_run/cost":   "window",
	})
}
