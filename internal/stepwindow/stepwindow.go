// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepwindow keeps a bounded, time-indexed window of recent engine
// steps per engine instance and rebuilds a request's token timestamps, and so
// its inter-token latency, from the ends of the steps that gave it tokens.
//
// Request spans arrive after their request finished while steps stream in as
// it runs, so the window must still hold a request's steps when its span
// arrives. When it no longer does, Lookup says so (StatusEvicted) rather than
// guess. A Window is safe for concurrent use.
//
//go:generate go tool mdatagen metadata.yaml
package stepwindow // import "github.com/inferprof/inferprof/internal/stepwindow"

import (
	"cmp"
	"slices"
	"time"
)

// Config bounds a Window. Zero fields take the defaults from NewDefaultConfig.
type Config struct {
	// MaxAge evicts steps that ended this long before the newest step of
	// their instance. Default 5m.
	MaxAge time.Duration
	// MaxSteps caps the steps kept per instance. Default 120000 (10 minutes at
	// 200 steps/s).
	MaxSteps int
	// MaxRecords caps the (request, step) token records kept across all
	// instances, the window's main memory cost (about 42 bytes each); the
	// oldest steps go first. Default 2,000,000 (about 85 MB).
	MaxRecords int
	// MaxInstances caps the engine windows tracked, one per (service
	// instance, engine); the one updated least recently goes first.
	// Default 256.
	MaxInstances int
	// MaxSources caps the step sources (engine processes) remembered per
	// engine window. A source whose last step has left the window is forgotten
	// anyway; past the cap the one heard least recently goes first and is
	// counted. Default 1024.
	MaxSources int
	// StallFactor counts a gap as a stall when it exceeds StallFactor times
	// the request's median gap. Default 3.
	StallFactor float64
}

// NewDefaultConfig returns the default bounds.
func NewDefaultConfig() Config {
	return Config{
		MaxAge:       5 * time.Minute,
		MaxSteps:     120_000,
		MaxRecords:   2_000_000,
		MaxInstances: 256,
		MaxSources:   1024,
		StallFactor:  3,
	}
}

func (c Config) withDefaults() Config {
	d := NewDefaultConfig()
	if c.MaxAge <= 0 {
		c.MaxAge = d.MaxAge
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = d.MaxSteps
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = d.MaxRecords
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = d.MaxInstances
	}
	if c.MaxSources <= 0 {
		c.MaxSources = d.MaxSources
	}
	if c.StallFactor <= 0 {
		c.StallFactor = d.StallFactor
	}
	return c
}

// Step is one engine step as the window needs it. See FromSpan.
type Step struct {
	// Engine identifies the engine (host and engine index) within its
	// service instance: each gets its own window. A restarted engine
	// process keeps its engine and is a new Source.
	Engine uint64
	// Source identifies the process that numbered Index (pid and engine
	// index); several sources may feed one engine window.
	Source uint64
	// Index is the step's number in its source, from 1. A jump marks lost
	// steps, which make the requests they overlap incomplete.
	Index uint64
	// StartUnixNs and EndUnixNs bound the step; tokens count as produced at
	// its end.
	StartUnixNs int64
	EndUnixNs   int64
	// RequestIDs got RequestTokens[i] tokens each in this step.
	RequestIDs    []string
	RequestTokens []int64
	// Truncated marks a step whose request id list the hook cut short.
	Truncated bool
}

// Status says how far a Result can be trusted.
type Status int

const (
	// StatusOK means the window covered the whole request.
	StatusOK Status = iota
	// StatusNoSteps means the window covers the request's time but holds no
	// token for it (unknown id, or no step data for that instance yet).
	StatusNoSteps
	// StatusEvicted means steps from the request's lifetime already left the
	// window, or were never seen (the window started after the request
	// arrived); no figures are given.
	StatusEvicted
	// StatusIncomplete means steps were lost or truncated while the request
	// ran; the figures cover the tokens seen and may overstate gaps.
	StatusIncomplete
	// StatusUnknownInstance means no step of the instance was ever seen.
	StatusUnknownInstance
)

// String returns the status as used in span attributes.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusNoSteps:
		return "no_steps"
	case StatusEvicted:
		return "evicted"
	case StatusIncomplete:
		return "incomplete"
	case StatusUnknownInstance:
		return "unknown_instance"
	default:
		return "unknown"
	}
}

// Result is a request's inter-token latency rebuilt from steps.
type Result struct {
	Status Status
	// Tokens is the number of tokens the steps gave the request.
	Tokens int
	// TokenSteps is the number of steps that gave it tokens.
	TokenSteps int
	// Gaps holds the time between consecutive token steps, in seconds; one
	// per step after the first, as `vllm bench serve` counts ITL per chunk.
	Gaps []float64
	// P50, P99 and Max summarise Gaps (nearest-rank percentiles); zero when
	// Gaps is empty.
	P50, P99, Max float64
	// DecodeSteps is len(Gaps): the steps after the first token.
	DecodeSteps int
	// Stalls counts gaps above StallFactor times P50.
	Stalls int
	// GPU is the request's share of its steps' GPU time (gpu.go).
	GPU RequestGPU
}

// Stats are the window's counters.
type Stats struct {
	// Instances counts the service instances (or, without an instance id,
	// service names) with steps; Engines their engine windows.
	Instances    int
	Engines      int
	Steps        int
	Records      int
	EvictedSteps uint64 // steps that left the window for age or size
	// EvictedInstances counts engine windows dropped at MaxInstances.
	EvictedInstances uint64
	// Sources is the number of step sources remembered, all instances.
	Sources int
	// EvictedSources counts sources forgotten at MaxSources while their
	// last step was still in the window.
	EvictedSources uint64
}

// GPU is a step's GPU figures, as the inference processor got them from
// the kernels the step launched. Times in nanoseconds.
type GPU struct {
	// Missing says why the figures are absent or partial ("" when whole);
	// with no figures at all KernelNS is 0 and Known is false.
	Missing string
	Known   bool
	// KernelNS is the step's kernel time; Categories splits it.
	KernelNS   uint64
	Categories []GPUCategory
	// IdleNS is the GPU idle time the step's CPU work caused: before its
	// first kernel and between its kernels.
	IdleNS uint64
}

// GPUCategory is the kernel time of one kernel category.
type GPUCategory struct {
	Category string
	NS       uint64
}

// RequestGPU is a request's share of the GPU work of the steps that gave it
// tokens: in each step, its tokens over the step's tokens.
type RequestGPU struct {
	// Steps had figures; Pending are still gathering them; Missing had
	// none or partial ones (MissingReason is the first such reason).
	Steps, Pending, Missing int
	MissingReason           string
	// TimeNS is the request's share of the steps' kernel time, and
	// Categories splits it.
	TimeNS     float64
	Categories []RequestCategory
	// CPUOverheadNS sums the steps' GPU idle time: the request waited
	// through each step whole, so it is not split.
	CPUOverheadNS uint64
}

// RequestCategory is a request's share of one kernel category.
type RequestCategory struct {
	Category string
	NS       float64
}

// Known reports whether any step of the request carried GPU information.
func (g RequestGPU) Known() bool { return g.Steps+g.Pending+g.Missing > 0 }

// SortCategories orders Categories by time, largest first.
func (g *RequestGPU) SortCategories() {
	slices.SortFunc(g.Categories, func(x, y RequestCategory) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(x.Category, y.Category))
	})
}
