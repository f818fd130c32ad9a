// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package inferprofuiexporter serves inferprof's local UI: the dashboard at
// GET / and the request timeline at GET /timeline, from the spans and
// metrics of the pipelines it is in.
package inferprofuiexporter // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter"

//go:generate go tool mdatagen metadata.yaml
