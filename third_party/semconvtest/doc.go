// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package semconvtest is an empty stand-in for contrib's pkg/semconvtest.
// Only k8sattributesprocessor's integration-tagged test imports it; nothing
// here is compiled into otelcol-inferprof. `go mod tidy` (ocb's, and the root
// module's) needs the package to exist, and the module proxy serves the real
// one at no version.
package semconvtest
