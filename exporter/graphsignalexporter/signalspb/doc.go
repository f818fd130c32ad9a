// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package signalspb holds Graphsignal's wire schemas: v1 (/api/v1/ingest) and
// v0 (/api/v1/signals/, used only by the opt-in traces mode).
package signalspb // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb"

//go:generate ./generate.sh
