// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package unixsock // import "github.com/inferprof/inferprof/internal/unixsock"

import "io/fs"

// owner is unknown where there are no uids.
func owner(fs.FileInfo) (int, bool) { return 0, false }
