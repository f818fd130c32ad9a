// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepfilterprocessor drops engine step spans on their way to trace
// exporters, after the inference processor and connector have used them.
//
//go:generate go tool mdatagen metadata.yaml
package stepfilterprocessor // import "github.com/inferprof/inferprof/processor/stepfilterprocessor"
