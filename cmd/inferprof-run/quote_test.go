// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShellJoinRoundTrips hands -dry-run's command line to a real shell and
// checks that it gets back the arguments as given.
func TestShellJoinRoundTrips(t *testing.T) {
	args := []string{"/usr/bin/printf", `%s\n`, "serve", "meta-llama/Llama-3.1-8B", "--chat-template", "{{ 'a b' }}", "it's", "", "$HOME", "a\"b", "--x=1"}
	line := shellJoin(args)
	assert.True(t, strings.HasPrefix(line, "/usr/bin/printf '%s\\n' serve meta-llama/Llama-3.1-8B"), line)
	out, err := exec.Command("sh", "-c", line).Output()
	require.NoError(t, err)
	assert.Equal(t, strings.Join(args[2:], "\n")+"\n", string(out))
}
