// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package k8scheckextension says once, at start, which Kubernetes metadata
// the agent can add where it runs, and refuses a setting that cannot start.
//
//go:generate go tool mdatagen metadata.yaml
package k8scheckextension // import "github.com/inferprof/inferprof/extension/k8scheckextension"
