// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package privacyprocessor removes prompts and model outputs from traces,
// logs and metrics, with inferprof's one content list (internal/privacy).
//
//go:generate go tool mdatagen metadata.yaml
package privacyprocessor // import "github.com/inferprof/inferprof/processor/privacyprocessor"
