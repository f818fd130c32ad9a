// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepstoreextension holds a collector's step-to-kernel correlation
// state, which the cupti receiver, the engine_step receiver and the
// processors that join GPU figures reference by id.
//
//go:generate go tool mdatagen metadata.yaml
package stepstoreextension // import "github.com/inferprof/inferprof/extension/stepstoreextension"
