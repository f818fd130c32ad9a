// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCUPTISkipReasonIsWhole runs native/cupti's real skip note (no CUPTI
// headers) and the summary over it: every line of the note, the apt
// commands included, reaches the summary. The note's printf line used to be
// written by sh's echo, which turned its \n into line breaks, and the summary
// stopped at the first of them.
func TestCUPTISkipReasonIsWhole(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	native := filepath.Join(filepath.Dir(file), "..", "..", "native", "cupti")
	out, err := exec.Command("make", "-s", "--no-print-directory", "-C", native, "test-cupti-layer", "TEST_CUPTI_CFLAGS=").CombinedOutput()
	require.NoError(t, err, "%s", out)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.log"), out, 0o600))
	var rep bytes.Buffer
	require.NoError(t, report(dir, &rep))
	for _, want := range []string{
		"no CUPTI headers",
		`Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > /etc/apt/sources.list.d/non-free.sources`,
		"apt-get install -y --no-install-recommends libcupti-dev",
		"(or set CUPTI_HOME, CUPTI_INCLUDE or CUDA_HOME to a CUDA toolkit)",
	} {
		assert.Contains(t, rep.String(), want)
	}
}
