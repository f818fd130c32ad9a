// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProc lays out /proc/<pid>/cmdline and environ, NUL-separated.
func fakeProc(t *testing.T, cmdlines, environs map[string][]string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, argv := range cmdlines {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, pid, "cmdline"), []byte(strings.Join(argv, "\x00")+"\x00"), 0o644))
		if env, ok := environs[pid]; ok {
			require.NoError(t, os.WriteFile(filepath.Join(dir, pid, "environ"), []byte(strings.Join(env, "\x00")+"\x00"), 0o644))
		}
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "self"), 0o755))
	return dir
}

func TestWarnsWhenACollectorRunsTheDiscoveryOverlay(t *testing.T) {
	proc := fakeProc(t, map[string][]string{
		"10": {"/usr/bin/otelcol-inferprof", "--feature-gates=confmap.enableMergeAppendOption",
			"--config", "/etc/inferprof/default.yaml", "--config", "/etc/inferprof/engine-discovery.yaml"},
		"11": {"otelcol-inferprof", "--config=config/engine-discovery.yaml"},
		"12": {"otelcol-inferprof", "--config", "config/default.yaml"},
		"13": {"vim", "engine-discovery.yaml.orig"},
		"14": {"otelcol-inferprof", "--config", "engine-discovery.yaml"},
		"15": {"otelcol-inferprof", "--config", "engine-discovery.yaml"},
	}, map[string][]string{
		"10": {"HOME=/root", envTargetsDir + "=/run/eng/"},
		"11": {"HOME=/root", envTargetsDir + "=/run/eng"},
		"12": {envTargetsDir + "=/run/eng"},
		"14": {"HOME=/root"}, // reads the default folder, not this launch's
		// 15: environ unreadable (another user): not counted
	})
	assert.ElementsMatch(t, []int{10, 11}, discoveringCollectors(proc, "/run/eng"))
	assert.ElementsMatch(t, []int{14}, discoveringCollectors(proc, defaultTargetsDir))
	var out strings.Builder
	warnDiscovery(&out, proc, "/run/eng")
	assert.Contains(t, out.String(), "inferprof-run: warning: process 1")
	assert.Contains(t, out.String(), "-no-engine-metrics")
	assert.Equal(t, 1, strings.Count(out.String(), "\n"), "one line")
}

func TestNoWarningWithoutTheDiscoveryOverlay(t *testing.T) {
	proc := fakeProc(t, map[string][]string{
		"12": {"otelcol-inferprof", "--config", "config/default.yaml"},
		"13": {"python3", "/usr/local/bin/vllm", "serve", "m"},
	}, map[string][]string{"12": {envTargetsDir + "=/run/eng"}})
	assert.Empty(t, discoveringCollectors(proc, "/run/eng"))
	var out strings.Builder
	warnDiscovery(&out, proc, "/run/eng")
	assert.Empty(t, out.String())
}
