// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"
)

func planHook(p *plan, o options, exe string) error {
	if o.noHook {
		p.set(envHookDisabled, "1", "-no-hook: the engine step hook stays off")
		return nil
	}
	// Set even when the folder is not found: a hook installed another way
	// reads it too.
	p.set(envStepEndpoint, o.stepEndpoint, "where the hook sends steps: the engine_step receiver's socket")
	checkSocket(p, "engine_step", o.stepEndpoint)
	dir := o.hookDir
	if dir == "" {
		dir = findFirst(hookCandidates(exe), "sitecustomize.py")
	}
	switch {
	case dir == "":
		p.warnings = append(p.warnings, "engine step hook not found (set -hook-dir or "+envHookDir+"); running without it")
		return nil
	case !exists(filepath.Join(dir, "sitecustomize.py")):
		return fmt.Errorf("hook dir %s has no sitecustomize.py", dir)
	}
	abs, _ := filepath.Abs(dir)
	p.set(envPythonPath, prependPath(abs, p.vars[envPythonPath]), "loads the engine step hook in the server and its engine processes")
	return nil
}

// hookCandidates are the folders searched for sitecustomize.py: an install
// layout (bin/ next to share/inferprof/python/bootstrap) and the source tree
// (bin/inferprof-run in the repository).
func hookCandidates(exe string) []string {
	d := filepath.Dir(exe)
	return []string{
		filepath.Join(d, "..", "share", "inferprof", "python", "bootstrap"),
		filepath.Join(d, "..", "integrations", "python", "bootstrap"),
	}
}

// findFirst returns the first candidate that exists (holding file, if set).
func findFirst(candidates []string, file string) string {
	for _, c := range candidates {
		if exists(filepath.Join(c, file)) {
			return filepath.Clean(c)
		}
	}
	return ""
}
