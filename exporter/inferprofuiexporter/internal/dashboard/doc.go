// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

// The types of GET /dashboard.json, apart from the code that fills them:
// History holds two of them (Targets, ErrorRow), so they stand below it.

// Targets are the goodput targets the dashboard draws, in seconds; 0 means
// none. They are the inference_metrics connector's, as it emits them.
type Targets struct {
	TTFT float64 `json:"ttft"`
	TPOT float64 `json:"tpot"`
	E2E  float64 `json:"e2e"`
}

// Doc is GET /dashboard.json. Times are unix milliseconds, durations
// seconds; null means not measured.
type Doc struct {
	Version  string                    `json:"version"`
	NowMs    int64                     `json:"now_ms"`
	StartMs  int64                     `json:"start_ms"`
	Targets  Targets                   `json:"targets"`
	Latency  map[string][]LatencyPoint `json:"latency"`
	Phases   []PhasePoint              `json:"phases"`
	Goodput  []GoodputPoint            `json:"goodput"`
	Totals   Totals                    `json:"totals"`
	Kernels  Kernels                   `json:"kernels"`
	GPUs     []GPU                     `json:"gpus"`
	Slowest  []SlowRequest             `json:"slowest"`
	Timeline TimelineInfo              `json:"timeline"`
	// LatencySource says where each latency chart's points come from:
	// request spans, or the engine's own histogram when no request span
	// arrived (tracing off). EngineLatency is the engine's own always, a
	// cross-check of the spans' figures.
	LatencySource map[string]string         `json:"latency_source"`
	EngineLatency map[string][]LatencyPoint `json:"engine_latency"`
	Engines       []EngineSeries            `json:"engines"`
	Errors        []ErrorRow                `json:"errors"`
}

// LatencyPoint is one flush's percentiles, read as /signals reads them:
// from the exponential twin where the connector sends one, within
// RelativeError of exact, else estimated inside the histogram buckets
// (bucketquantile.Quantile).
type LatencyPoint struct {
	T             int64    `json:"t"`
	Count         int64    `json:"count"`
	P50           *float64 `json:"p50"`
	P90           *float64 `json:"p90"`
	P99           *float64 `json:"p99"`
	Method        string   `json:"quantile_method"`
	RelativeError *float64 `json:"relative_error"`
}

// PhasePoint is one flush's mean time per request in each phase.
type PhasePoint struct {
	T       int64    `json:"t"`
	Queue   *float64 `json:"queue"`
	Prefill *float64 `json:"prefill"`
	Decode  *float64 `json:"decode"`
	Other   *float64 `json:"other"`
}

// GoodputPoint is one flush's request counts.
type GoodputPoint struct {
	T        int64 `json:"t"`
	Requests int64 `json:"requests"` // successful
	Good     int64 `json:"good"`
	Errors   int64 `json:"errors"`
}

// Totals are the counts since the collector started.
type Totals struct {
	Requests     int64    `json:"requests"` // successful
	Good         int64    `json:"good"`
	Errors       int64    `json:"errors"`
	GoodputRatio *float64 `json:"goodput_ratio"`
}

// Kernels is GPU kernel time since the collector started.
type Kernels struct {
	TotalSeconds float64       `json:"total_seconds"`
	Top          []KernelRow   `json:"top"`
	Categories   []CategoryRow `json:"categories"`
}

// KernelRow is one kernel's totals.
type KernelRow struct {
	Name     string  `json:"name"`
	Category string  `json:"category"`
	Seconds  float64 `json:"seconds"`
	Count    int64   `json:"count"`
}

// CategoryRow is one category's GPU time.
type CategoryRow struct {
	Category string  `json:"category"`
	Seconds  float64 `json:"seconds"`
	Share    float64 `json:"share"`
}

// GPU is one device's readings over time: [unix ms, value] pairs.
type GPU struct {
	Host        string       `json:"host"`
	ID          string       `json:"id"`
	Name        string       `json:"name"`
	Utilization [][2]float64 `json:"utilization"` // percent
	MemoryGiB   [][2]float64 `json:"memory_gib"`
	MemoryLimit *float64     `json:"memory_limit_gib"`
	PowerW      [][2]float64 `json:"power_w"`
}

// SlowRequest is one of the slowest requests the timeline holds.
type SlowRequest struct {
	RequestID    string   `json:"request_id"`
	TraceID      string   `json:"trace_id"`
	Instance     string   `json:"instance"`
	Model        string   `json:"model"`
	StartMs      int64    `json:"start_ms"`
	E2E          float64  `json:"e2e"`
	TTFT         *float64 `json:"ttft"`
	TPOT         *float64 `json:"tpot"`
	Queue        *float64 `json:"queue"`
	Prefill      *float64 `json:"prefill"`
	Decode       *float64 `json:"decode"`
	Other        *float64 `json:"other"`
	OutputTokens *int64   `json:"output_tokens"`
	Error        string   `json:"error"`
	Timeline     string   `json:"timeline"` // /timeline URL of its window
}

// TimelineInfo says how full the timeline store is.
type TimelineInfo struct {
	Enabled         bool  `json:"enabled"`
	Requests        int   `json:"requests"`
	UsedBytes       int64 `json:"used_bytes"`
	BudgetBytes     int64 `json:"budget_bytes"`
	EvictedRecords  int64 `json:"evicted_records"`
	SkippedBadSpans int64 `json:"skipped_bad_spans"`
}

// EngineSeries is one engine instance's own gauges over time: [unix ms,
// value] pairs. KV-cache usage is a fraction (0–1); preemptions are per
// flush.
type EngineSeries struct {
	Service      string       `json:"service"`
	Instance     string       `json:"instance"`
	KVCacheUsage [][2]float64 `json:"kv_cache_usage"`
	Running      [][2]float64 `json:"running"`
	Waiting      [][2]float64 `json:"waiting"`
	Preemptions  [][2]float64 `json:"preemptions"`
}

// ErrorRow is one error record: an engine's (from inferprof-run) or a
// device's (nvml XID events).
type ErrorRow struct {
	T        int64  `json:"t"` // unix ms
	Service  string `json:"service"`
	Instance string `json:"instance"`
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}
