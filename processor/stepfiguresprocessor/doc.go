// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepfiguresprocessor writes figures rebuilt from engine.step
// spans (inter-token latency, GPU time per step and per request) on the
// request spans of the same engine.
//
//go:generate go tool mdatagen metadata.yaml
package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"
