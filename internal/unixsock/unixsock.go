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

// Prepare makes path ready to bind a socket of network ("unix" or
// "unixgram"): it creates a missing folder owner-only (0700), and removes a
// stale socket file left by a crashed collector. A path that is not a socket,
// or that a live process still serves, is an error: never take over another
// collector's socket.
func Prepare(path, network string) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create socket folder %s: %w", dir, err)
		}
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
		return fmt.Errorf("endpoint %s: another process is serving it", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
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
