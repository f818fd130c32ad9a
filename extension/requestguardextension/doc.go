// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package requestguardextension is an HTTP and gRPC server middleware that
// refuses request bodies nested too deep to decode safely, and requests for
// a Host that is not the listener's own.
//
//go:generate go tool mdatagen metadata.yaml
package requestguardextension // import "github.com/inferprof/inferprof/extension/requestguardextension"
