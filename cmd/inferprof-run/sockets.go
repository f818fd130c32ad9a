// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// checkSocket says what the engine will meet at a collector socket: the
// hook and the CUPTI library drop their records silently when they cannot
// write there, so the launcher is the one place that can tell the user.
// The collector makes its sockets owner-only (internal/unixsock).
func checkSocket(p *plan, what, path string) {
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.notes = append(p.notes, "no "+what+" socket at "+path+" yet: start the collector, or its records are dropped until it listens")
	case errors.Is(err, fs.ErrPermission):
		p.warnings = append(p.warnings, "cannot reach the "+what+" socket "+path+": its folder is not open to this user;"+
			" run the engine as the collector's user (docs/troubleshooting.md, socket permissions)")
	case err != nil:
		p.warnings = append(p.warnings, "the "+what+" socket "+path+": "+err.Error())
	case syscall.Access(path, 2 /* W_OK */) != nil:
		p.warnings = append(p.warnings, "cannot write to the "+what+" socket "+path+": it is owner-only and another user runs the collector;"+
			" run the engine as the collector's user (docs/troubleshooting.md, socket permissions)")
	}
}
