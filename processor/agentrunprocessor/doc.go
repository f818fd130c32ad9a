// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package agentrunprocessor assembles agent runs from their GenAI spans and
// the engine request spans their model calls reached, and prices model calls
// and engine requests.
//
//go:generate go tool mdatagen metadata.yaml
package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"
