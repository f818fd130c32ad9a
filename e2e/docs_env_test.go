// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

var envRef = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)`)

// TestReadmeListsEveryVariable: every environment variable a shipped config
// reads has a row in the README's table, with the config's default. A
// second instance on one host needs them all; a list that ends in "…"
// leaves the user to grep.
func TestReadmeListsEveryVariable(t *testing.T) {
	root := e2etest.RepoRoot()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 3 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	defaults := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`).FindAllStringSubmatch(string(b), -1) {
			defaults[m[1]] = m[2]
		}
		require.NotEmpty(t, envRef.FindAllString(string(b), -1), f)
	}
	var vars []string
	for v := range defaults {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	for _, v := range vars {
		row, ok := rows[v]
		if !assert.Truef(t, ok, "README.md lists no %s, which a shipped config reads", v) {
			continue
		}
		if d := defaults[v]; d != "" {
			assert.Containsf(t, row, "`"+d+"`", "README.md's default for %s", v)
		}
	}
	for _, v := range []string{"INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT", "INFERPROF_UI_ENDPOINT", "INFERPROF_STEP_ENDPOINT", "INFERPROF_CUPTI_ENDPOINT"} {
		assert.Contains(t, vars, v, "the check reads the configs")
	}
}
