// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package local // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"

import (
	"github.com/inferprof/inferprof/internal/bucketquantile"
)

// Signals is the /signals document (Graphsignal reference §6). Fields
// ending in _ns are epoch nanoseconds, _ts epoch seconds; null means not
// measured, 0 a measured zero.
type Signals struct {
	Profiler  Profiler          `json:"profiler"`
	PayloadNs int64             `json:"payload_ns"`
	StartNs   int64             `json:"start_ns"`
	Context   map[string]string `json:"context"`
	Metrics   []Metric          `json:"metrics"`
	Errors    []Error           `json:"errors"`
	Resources []Resource        `json:"resources"`
}

// Profiler names what produced the document.
type Profiler struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Metric is one series; Stats depends on Type.
type Metric struct {
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	Tags      map[string]string `json:"tags"`
	Stats     any               `json:"stats"`
	UpdatedNs int64             `json:"updated_ns"`
}

// GaugeStats is a gauge's latest value.
type GaugeStats struct {
	Value float64 `json:"value"`
}

// CounterStats is a counter's total since start_ns.
type CounterStats struct {
	Total float64 `json:"total"`
}

// QuantileMethod labels the percentiles in /signals of a histogram without
// an exponential twin: they are estimates, interpolated linearly inside the
// histogram bucket that holds the quantile, not exact percentiles of the
// recorded values.
const QuantileMethod = bucketquantile.Method

// HistogramStats summarises a histogram since start_ns. The percentiles
// are estimates, by QuantileMethod or, where the connector keeps an
// exponential twin, QuantileMethodExponential, within RelativeError of the
// exact nearest-rank percentile. The exact percentile lies within P50Bucket
// / P95Bucket, [lower, upper]. A bound is null where the data does not tell
// it (no min below the first bucket; no max above the last, whose overflow
// Graphsignal's format folds in); RelativeError is null for bucket
// interpolation, whose error only the bucket bounds it. Quantiles are null
// without bins.
type HistogramStats struct {
	Count          *int64      `json:"count"`
	Sum            *float64    `json:"sum"`
	Min            *float64    `json:"min"`
	Max            *float64    `json:"max"`
	Mean           *float64    `json:"mean"`
	P50            *float64    `json:"p50"`
	P90            *float64    `json:"p90"`
	P95            *float64    `json:"p95"`
	P99            *float64    `json:"p99"`
	QuantileMethod string      `json:"quantile_method"`
	RelativeError  *float64    `json:"relative_error"`
	P50Bucket      [2]*float64 `json:"p50_bucket"`
	P95Bucket      [2]*float64 `json:"p95_bucket"`
	// Bins and Counts are the bins (upper bounds, ascending) and their
	// counts since start_ns, as graphsignal 1.1.2 serves them so a reader
	// can diff two snapshots; null without bins.
	Bins   []float64 `json:"bins"`
	Counts []int64   `json:"counts"`
}

// ProfileStats lists frames by value, largest first.
type ProfileStats struct {
	Frames []Frame `json:"frames"`
}

// Frame is one profile frame's totals since start_ns.
type Frame struct {
	Name    string `json:"name"`
	Value   uint64 `json:"value"`
	Samples uint64 `json:"samples"`
}

// Error is a recent log entry at warning level or above. Exception is
// null when the entry has none, as graphsignal 1.1.2's LogStore keeps it.
type Error struct {
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Exception *string           `json:"exception"`
	Tags      map[string]string `json:"tags"`
	LogNs     int64             `json:"log_ns"`
}

// Resource is a host, process or device seen recently. Its times are
// whole epoch seconds, as graphsignal 1.1.2 serves them (ns // 1e9).
type Resource struct {
	Kind        string            `json:"kind"`
	Tags        map[string]string `json:"tags"`
	Attributes  map[string]string `json:"attributes"`
	FirstSeenTs int64             `json:"first_seen_ts"`
	LastSeenTs  int64             `json:"last_seen_ts"`
}
