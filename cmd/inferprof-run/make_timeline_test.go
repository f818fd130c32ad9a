// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeTimelineWritesUnderBin: `make timeline` saves into bin/ (ignored
// by git), not the repository root, and TIMELINE_OUT moves it.
func TestMakeTimelineWritesUnderBin(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	out, err := exec.Command("make", "-n", "-s", "-C", repoRoot(), "timeline").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "bin/inferprof-run --timeline bin/inferprof-timeline.json ")
	out, err = exec.Command("make", "-n", "-s", "-C", repoRoot(), "timeline", "TIMELINE_OUT=/tmp/t.json").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--timeline /tmp/t.json ")
}
