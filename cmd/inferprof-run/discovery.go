// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// discoveryOverlay is the collector overlay that finds engines on the host by
// itself (config/engine-discovery.yaml). It cannot tell an engine the
// launcher started from any other (it sees only the command line), so an
// engine that also has a target would be scraped twice.
const discoveryOverlay = "engine-discovery.yaml"

// discoveringCollectors returns the pids of processes under procDir whose
// command line names the discovery overlay (--config .../engine-discovery.yaml
// or --config=...) and whose environment reads engine targets from dir, the
// folder this launch writes to: the collector this engine reports to. One
// read of each cmdline at start: cheap, and only a hint; a collector in
// another pid namespace, of another user, or loading the overlay under
// another name, is not seen.
func discoveringCollectors(procDir, dir string) []int {
	dirs, _ := filepath.Glob(filepath.Join(procDir, "[0-9]*"))
	var pids []int
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !namesOverlay(b) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		if filepath.Clean(targetsDirOf(env)) == filepath.Clean(dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func namesOverlay(cmdline []byte) bool {
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if filepath.Base(string(bytes.TrimPrefix(arg, []byte("--config=")))) == discoveryOverlay {
			return true
		}
	}
	return false
}

// targetsDirOf is the targets folder a collector with this environment
// reads (the shipped configs' ${env:INFERPROF_ENGINE_TARGETS_DIR:-...}).
func targetsDirOf(environ []byte) string {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(envTargetsDir+"=")); ok && len(v) > 0 {
			return string(v)
		}
	}
	return defaultTargetsDir
}

// warnDiscovery says, once at start, that the engine will be scraped twice
// when the collector reading its target also runs the discovery overlay.
func warnDiscovery(w io.Writer, procDir, dir string) {
	pids := discoveringCollectors(procDir, dir)
	if len(pids) == 0 {
		return
	}
	fmt.Fprintf(w, "inferprof-run: warning: process %d runs the collector overlay %s, which scrapes this engine too:"+
		" its metrics will be counted twice; use -no-engine-metrics with that overlay (docs/engine-metrics.md)\n",
		pids[0], discoveryOverlay)
}
