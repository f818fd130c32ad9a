// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package graphsignalexporter uploads metrics and logs to Graphsignal's ingest
// API and serves the same signals as JSON on a loopback endpoint.
package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

//go:generate go tool mdatagen metadata.yaml
