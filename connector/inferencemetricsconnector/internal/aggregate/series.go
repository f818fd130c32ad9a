// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import "go.opentelemetry.io/collector/pdata/pcommon"

// What one series holds, and how its stats reset and merge. The bottom of
// the package above the histograms: every other file uses these types.

// Kind says which family of metrics a series holds.
type Kind uint8

const (
	// KindRequest series aggregate request spans.
	KindRequest Kind = iota + 1
	// KindStep series aggregate engine.step spans.
	KindStep
	// KindAgent series aggregate agent-run spans.
	KindAgent
	// KindCost series aggregate the cost of priced request spans.
	KindCost
	// KindTurns series aggregate finished conversations.
	KindTurns
)

// ResourceKey identifies a resource by a hash of its attributes.
type ResourceKey [16]byte

// RequestStats are the aggregates of one request series.
type RequestStats struct {
	TTFT, TPOT, Duration, Queue, Prefill, Decode, Other, ITL Histogram
	InputTokens, OutputTokens                                Histogram
	Requests, Goodput, InputTokenSum, OutputTokenSum         uint64
	// GPUTime sums the requests' share of GPU kernel time, by kernel
	// category (inferprof.gpu.categories / category_times).
	GPUTime []CategorySeconds
	// CPUOverheadShare observes each request's CPU overhead over its
	// duration (inferprof.latency.cpu_overhead / e2e).
	CPUOverheadShare Histogram
}

// CategorySeconds is GPU time of one kernel category.
type CategorySeconds struct {
	Category string
	Seconds  float64
}

// AddGPUTime adds seconds of GPU time of category.
func (r *RequestStats) AddGPUTime(category string, seconds float64) {
	for i := range r.GPUTime {
		if r.GPUTime[i].Category == category {
			r.GPUTime[i].Seconds += seconds
			return
		}
	}
	if len(r.GPUTime) >= maxGPUCategories {
		return
	}
	r.GPUTime = append(r.GPUTime, CategorySeconds{Category: category, Seconds: seconds})
}

// maxGPUCategories bounds the categories a series keeps (the built-in table
// has 15; the rest are user rules).
const maxGPUCategories = 64

// StepStats are the aggregates of one engine step series.
type StepStats struct {
	Duration, BatchSize, Tokens Histogram
	Steps, Preemptions          uint64
}

// AgentStats are the aggregates of one agent-run series.
type AgentStats struct {
	Duration, Model, Tools, Other Histogram
	Runs                          uint64
}

// CostStats are the aggregates of one cost series.
type CostStats struct {
	Cost     float64
	Requests uint64
	// OutputTokens and OutputCost cover the priced requests that said how
	// many tokens they generated: cost per 1k output tokens is their ratio.
	OutputTokens uint64
	OutputCost   float64
}

// TurnStats are the aggregates of one conversation series: the turns of each
// conversation, observed when it ends.
type TurnStats struct {
	Turns         Histogram
	Conversations uint64
}

// Series is one set of aggregates under one resource and one set of
// dimension values.
type Series struct {
	key      string
	res      *resource
	attrs    pcommon.Map
	start    pcommon.Timestamp
	lastSeen pcommon.Timestamp
	updated  bool // since the last flush
	// IsError marks request series of failed requests; they carry error.type
	// and no goodput.
	IsError bool
	Req     *RequestStats
	Step    *StepStats
	Agent   *AgentStats
	Cost    *CostStats
	Turn    *TurnStats
	// service and model count the series against its groups' caps.
	service, model string
}

// Attributes returns the series' dimensions, to fill once after Create.
func (s *Series) Attributes() pcommon.Map { return s.attrs }

// Touch records that the series was updated at now.
func (s *Series) Touch(now pcommon.Timestamp) {
	s.lastSeen = now
	s.updated = true
}

type resource struct {
	key    ResourceKey
	attrs  pcommon.Map
	series []*Series
}

func (r *RequestStats) hists() []*Histogram {
	return []*Histogram{&r.TTFT, &r.TPOT, &r.Duration, &r.Queue, &r.Prefill, &r.Decode, &r.Other, &r.ITL, &r.InputTokens, &r.OutputTokens, &r.CPUOverheadShare}
}

func (r *RequestStats) reset() {
	for _, h := range r.hists() {
		h.reset()
	}
	r.Requests, r.Goodput, r.InputTokenSum, r.OutputTokenSum = 0, 0, 0, 0
	r.GPUTime = r.GPUTime[:0]
}

func (r *RequestStats) merge(o *RequestStats) {
	for i, h := range r.hists() {
		h.merge(o.hists()[i])
	}
	r.Requests += o.Requests
	r.Goodput += o.Goodput
	r.InputTokenSum += o.InputTokenSum
	r.OutputTokenSum += o.OutputTokenSum
	for _, c := range o.GPUTime {
		r.AddGPUTime(c.Category, c.Seconds)
	}
}

func (p *StepStats) reset() {
	p.Duration.reset()
	p.BatchSize.reset()
	p.Tokens.reset()
	p.Steps, p.Preemptions = 0, 0
}

func (p *StepStats) merge(o *StepStats) {
	p.Duration.merge(&o.Duration)
	p.BatchSize.merge(&o.BatchSize)
	p.Tokens.merge(&o.Tokens)
	p.Steps += o.Steps
	p.Preemptions += o.Preemptions
}

func (a *AgentStats) merge(o *AgentStats) {
	a.Duration.merge(&o.Duration)
	a.Model.merge(&o.Model)
	a.Tools.merge(&o.Tools)
	a.Other.merge(&o.Other)
	a.Runs += o.Runs
}

func (c *CostStats) merge(o *CostStats) {
	c.Cost += o.Cost
	c.Requests += o.Requests
	c.OutputTokens += o.OutputTokens
	c.OutputCost += o.OutputCost
}

func (t *TurnStats) merge(o *TurnStats) {
	t.Turns.merge(&o.Turns)
	t.Conversations += o.Conversations
}
