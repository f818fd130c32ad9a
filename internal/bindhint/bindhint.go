// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package bindhint adds, to the error of one of our listeners whose address
// is taken, the setting and the environment variable that move it, so the
// user need not look the address up in the config.
package bindhint // import "github.com/inferprof/inferprof/internal/bindhint"

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/inferprof/inferprof/internal/unixsock"
)

// Wrap returns err with a hint when it says the address is in use (a TCP
// bind's EADDRINUSE, or a Unix socket a live process serves); other errors
// pass unchanged. key is the component's setting, env the variable the
// shipped configs set it from.
func Wrap(err error, key, env string) error {
	if err == nil || !(errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, unixsock.ErrInUse)) {
		return err
	}
	return fmt.Errorf("%w; another collector or program holds it: move %s (%s in the shipped configs; docs/troubleshooting.md)", err, key, env)
}
