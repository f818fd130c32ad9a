// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
)

// change is one variable inferprof-run set in the engine's environment.
type change struct {
	key, value string
	why        string
}

func (c change) String() string { return c.key + "=" + c.value + "  (" + c.why + ")" }

// plan is what inferprof-run will do: the command and its environment.
type plan struct {
	path     string
	args     []string
	env      []string
	changes  []change // in the order they were made
	notes    []string // things the user should know, nothing changed
	warnings []string // a part is missing; the engine runs without it

	vars  map[string]string
	order []string

	scrape *scrapeTarget // the engine's /metrics, for the collector; nil: none
	// onStart, when set, is called with the engine's pid as soon as it
	// started (supervise).
	onStart func(pid int)
}

// set puts key=value in the engine's environment and records why; a value
// already there unchanged is not a change.
func (p *plan) set(key, value, why string) {
	if old, ok := p.vars[key]; ok && old == value {
		return
	}
	if _, ok := p.vars[key]; !ok {
		p.order = append(p.order, key)
	}
	p.vars[key] = value
	p.changes = append(p.changes, change{key: key, value: value, why: why})
}

// prependPath puts dir first on a PATH-style list, once.
func prependPath(dir, list string) string {
	parts := []string{dir}
	for _, e := range filepath.SplitList(list) {
		if e != "" && e != dir {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
