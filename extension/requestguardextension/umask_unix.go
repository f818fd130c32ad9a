// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package requestguardextension // import "github.com/inferprof/inferprof/extension/requestguardextension"

import "syscall"

// The collector's files (the file exporter's traces, file_storage's queue)
// describe the requests it served; the file exporter creates them 0644 and
// has no option to change that. A umask set here, at process start, before
// any component creates a file, makes them owner-only. It lives in this
// package because every otelcol-inferprof build includes it and ocb
// generates main; nothing the collector writes is meant for other users
// (sockets get their mode from unixsock.Restrict, explicitly).
func init() {
	syscall.Umask(0o077)
}
