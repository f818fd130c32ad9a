// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package unixsock prepares the private Unix sockets that the engine-side
// parts of inferprof (the CUPTI library, the step hook) write to.
package unixsock // import "github.com/inferprof/inferprof/internal/unixsock"

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ErrInUse is returned by Prepare when a live process serves the socket.
var ErrInUse = errors.New("another process is serving it")

// Prepare makes path ready to bind a socket of network ("unix" or
// "unixgram"): it creates a missing folder owner-only (0700), and removes a
// stale socket file left by a crashed collector. A path that is not a socket,
// or that a live process still serves, is an error: never take over another
// collector's socket.
//
// An existing folder must be the collector's own and owner-only: in a shared
// folder (such as /tmp/inferprof made by another user) someone else could
// replace the socket and read or forge the engine's records.
func Prepare(path, network string) error {
	dir := filepath.Dir(path)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create socket folder %s: %w", dir, err)
		}
	}
	if err := checkFolder(dir, os.Getuid()); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("endpoint %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout(network, path, 200*time.Millisecond); err == nil {
		_ = c.Close()
		return fmt.Errorf("endpoint %s: %w", path, ErrInUse)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// checkFolder refuses a socket folder that is not a directory, is owned by
// another user than self, or is open to group or others. A symbolic link is
// refused, not followed: whoever owns the link (in /tmp, anyone) can point it
// elsewhere after the check, at a socket of their own.
func checkFolder(dir string, self int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket folder %s: %w", dir, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("socket folder %s is a symbolic link; it may be another user's: remove it, "+
			"or set the endpoint to a folder of your own", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket folder %s is not a directory: point the endpoint at a socket inside a folder of your own", dir)
	}
	if uid, ok := owner(fi); ok && uid != self {
		return fmt.Errorf("socket folder %s belongs to uid %d, not to this collector's user (uid %d): "+
			"remove it (it may be another user's collector) or set the endpoint to a folder this user owns, "+
			"such as $XDG_RUNTIME_DIR/inferprof/", dir, uid, self)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		return fmt.Errorf("socket folder %s has mode %04o; it must be 0700 so that no other user can replace "+
			"the socket: run chmod 700 %s, or set the endpoint to a folder of your own", dir, perm, dir)
	}
	return nil
}

// Restrict makes a bound socket owner-only (0600), so only the collector's
// user can write records to it.
func Restrict(path string) error {
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return nil
}
