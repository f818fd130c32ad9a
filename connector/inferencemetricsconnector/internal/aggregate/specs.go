// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

// The table of emitted metrics, read both by the explicit metrics
// (metrics.go) and by their exponential twins (exponential.go).

const attrTokenType = names.AttrTokenType

// Spec describes one emitted metric. Descriptions and units match
// metadata.yaml (a test checks it).
type Spec struct {
	Name, Description, Unit string
	kind                    Kind
	skipErrors              bool // the metric has no error.type: failed requests are left out
	hists                   []histPart
	sums                    []sumPart
	// categories, for a double sum with one point per kernel category.
	categories func(*Series) []CategorySeconds
	// perModel: a gauge per model and currency across the resource's cost
	// series (cost per 1k output tokens).
	perModel bool
	// targets: the goodput targets (Settings.GoodputTargets), one gauge
	// point each, on every resource with requests to judge.
	targets bool
}

// histPart is one data point of a series: its histogram and, when value is
// set, one more attribute (gen_ai.token.type by default).
type histPart struct {
	tokenType string
	key       string // the attribute tokenType goes under; "" for gen_ai.token.type
	get       func(*Series) *Histogram
}

func (p histPart) attrKey() string {
	if p.key == "" {
		return attrTokenType
	}
	return p.key
}

// sumPart is one sum data point; dget, when set, makes it a double sum.
type sumPart struct {
	tokenType string
	get       func(*Series) uint64
	dget      func(*Series) float64
}

func reqHist(get func(*RequestStats) *Histogram) []histPart {
	return []histPart{{get: func(s *Series) *Histogram { return get(s.Req) }}}
}

func stepHist(get func(*StepStats) *Histogram) []histPart {
	return []histPart{{get: func(s *Series) *Histogram { return get(s.Step) }}}
}

// Specs lists every metric the connector emits, in output order.
var Specs = []Spec{
	{
		Name: names.MetricTimeToFirstToken, Unit: "s", kind: KindRequest, skipErrors: true,
		Description: "Time from the request's arrival to its first output token, for successful requests (gen_ai.latency.time_to_first_token).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.TTFT }),
	},
	{
		Name: names.MetricTimePerOutputToken, Unit: "s", kind: KindRequest, skipErrors: true,
		Description: "Decode time divided by output tokens after the first, per successful request with at least 2 output tokens (gen_ai.latency.time_per_output_token).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.TPOT }),
	},
	{
		Name: names.MetricRequestDuration, Unit: "s", kind: KindRequest,
		Description: "Time from the request's arrival to its last output token (gen_ai.latency.e2e, else the span's duration), failed requests included with error.type.",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.Duration }),
	},
	{
		Name: names.MetricQueueDuration, Unit: "s", kind: KindRequest,
		Description: "Time a request waited in the engine's queue before it was first scheduled (gen_ai.latency.time_in_queue).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.Queue }),
	},
	{
		Name: names.MetricPrefillDuration, Unit: "s", kind: KindRequest,
		Description: "Time from first scheduling to the first token (gen_ai.latency.time_in_model_prefill).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.Prefill }),
	},
	{
		Name: names.MetricDecodeDuration, Unit: "s", kind: KindRequest,
		Description: "Time from the first to the last output token (gen_ai.latency.time_in_model_decode).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.Decode }),
	},
	{
		Name: names.MetricOtherDuration, Unit: "s", kind: KindRequest,
		Description: "The rest of a request's time outside queue, prefill and decode - tokenisation, detokenisation, the frontend (inferprof.latency.time_in_other).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.Other }),
	},
	{
		Name: names.MetricTokenUsage, Unit: "{token}", kind: KindRequest,
		Description: "Tokens per request, read (input) or generated (output); the server-side twin of gen_ai.client.token.usage.",
		hists: []histPart{
			{tokenType: "input", get: func(s *Series) *Histogram { return &s.Req.InputTokens }},
			{tokenType: "output", get: func(s *Series) *Histogram { return &s.Req.OutputTokens }},
		},
	},
	{
		Name: names.MetricTokens, Unit: "{token}", kind: KindRequest,
		Description: "Tokens read (input) or generated (output), summed over requests.",
		sums: []sumPart{
			{tokenType: "input", get: func(s *Series) uint64 { return s.Req.InputTokenSum }},
			{tokenType: "output", get: func(s *Series) uint64 { return s.Req.OutputTokenSum }},
		},
	},
	{
		Name: names.MetricRequests, Unit: "{request}", kind: KindRequest,
		Description: "Requests finished, failed ones included with error.type.",
		sums:        []sumPart{{get: func(s *Series) uint64 { return s.Req.Requests }}},
	},
	{
		Name: names.MetricGoodput, Unit: "{request}", kind: KindRequest, skipErrors: true,
		Description: "Successful requests that met every configured goodput target (TTFT, TPOT, e2e); compare with inferprof.server.requests.",
		sums:        []sumPart{{get: func(s *Series) uint64 { return s.Req.Goodput }}},
	},
	{
		Name: names.MetricGoodputTarget, Unit: "s", kind: KindRequest, skipErrors: true, targets: true,
		Description: "The goodput targets inferprof.server.goodput is judged against, one point per target set (inferprof.goodput.criterion), for dashboards to draw.",
	},
	{
		Name: names.MetricInterTokenLatency, Unit: "s", kind: KindRequest, skipErrors: true,
		Description: "One sample per gap between consecutive output tokens of a request, rebuilt from engine steps (inferprof.latency.itl.gaps); the definition vllm bench serve uses for ITL.",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.ITL }),
	},
	{
		Name: names.MetricGPUTime, Unit: "s", kind: KindRequest,
		Description: "GPU kernel time spent on requests, by kernel category: each request's share of the kernel time of the engine steps that gave it tokens, split by the tokens it got in each (inferprof.gpu.time, inferprof.gpu.categories).",
		categories:  func(s *Series) []CategorySeconds { return s.Req.GPUTime },
	},
	{
		Name: names.MetricCPUOverheadShare, Unit: "1", kind: KindRequest,
		Description: "Share of a request's duration its engine steps spent with the GPU idle, waiting on the CPU (inferprof.latency.cpu_overhead over gen_ai.latency.e2e).",
		hists:       reqHist(func(r *RequestStats) *Histogram { return &r.CPUOverheadShare }),
	},
	{
		Name: names.MetricStepDuration, Unit: "s", kind: KindStep,
		Description: "Wall-clock time of one engine scheduler iteration (an engine.step span).",
		hists:       stepHist(func(p *StepStats) *Histogram { return &p.Duration }),
	},
	{
		Name: names.MetricStepBatchSize, Unit: "{request}", kind: KindStep,
		Description: "Requests in one engine step, prefill and decode together.",
		hists:       stepHist(func(p *StepStats) *Histogram { return &p.BatchSize }),
	},
	{
		Name: names.MetricStepTokens, Unit: "{token}", kind: KindStep,
		Description: "Tokens scheduled in one engine step.",
		hists:       stepHist(func(p *StepStats) *Histogram { return &p.Tokens }),
	},
	{
		Name: names.MetricPreemptions, Unit: "{request}", kind: KindStep,
		Description: "Requests preempted by the engine's scheduler, counted from engine.step spans.",
		sums:        []sumPart{{get: func(s *Series) uint64 { return s.Step.Preemptions }}},
	},
	{
		Name: names.MetricAgentRunDuration, Unit: "s", kind: KindAgent,
		Description: "Duration of an agent run (an invoke_agent span or an instrumentation's equivalent), failed runs included with error.type.",
		hists:       []histPart{{get: func(s *Series) *Histogram { return &s.Agent.Duration }}},
	},
	{
		Name: names.MetricAgentPartDuration, Unit: "s", kind: KindAgent,
		Description: "Time of an agent run spent in model calls, in tool calls outside them, and in the rest (inferprof.agent.time_in_model, _tools, _other), by part.",
		hists: []histPart{
			{key: names.AttrAgentPart, tokenType: "model", get: func(s *Series) *Histogram { return &s.Agent.Model }},
			{key: names.AttrAgentPart, tokenType: "tools", get: func(s *Series) *Histogram { return &s.Agent.Tools }},
			{key: names.AttrAgentPart, tokenType: "other", get: func(s *Series) *Histogram { return &s.Agent.Other }},
		},
	},
	{
		Name: names.MetricAgentTurns, Unit: "{turn}", kind: KindTurns,
		Description: "Turns per conversation (gen_ai.conversation.id), observed once a conversation has had no turn for conversations.idle, or at shutdown.",
		hists:       []histPart{{get: func(s *Series) *Histogram { return &s.Turn.Turns }}},
	},
	{
		Name: names.MetricCost, Unit: "{currency}", kind: KindCost,
		Description: "Cost of priced requests (inferprof.request.cost), by model, provider, user, agent and currency.",
		sums:        []sumPart{{dget: func(s *Series) float64 { return s.Cost.Cost }}},
	},
	{
		Name: names.MetricCostPer1kOutput, Unit: "{currency}", kind: KindCost, perModel: true,
		Description: "Cost per 1000 output tokens of the priced requests that report output tokens, by model and currency, over the same time as inferprof.cost.",
	},
}

// applies reports whether spec has a data point for s.
func (spec *Spec) applies(s *Series) bool {
	switch spec.kind {
	case KindRequest:
		return s.Req != nil && s.Req.Requests > 0 && !(spec.skipErrors && s.IsError)
	case KindAgent:
		return s.Agent != nil && s.Agent.Runs > 0
	case KindCost:
		return s.Cost != nil && s.Cost.Requests > 0
	case KindTurns:
		return s.Turn != nil && s.Turn.Conversations > 0
	default:
		return s.Step != nil && s.Step.Steps > 0
	}
}

// newMetric adds a metric to the resource's scope, creating the resource the
// first time, so that resources with nothing to say are left out.
func (st *Store) newMetric(md pmetric.Metrics, ms pmetric.MetricSlice, resAttrs pcommon.Map, spec *Spec) (pmetric.MetricSlice, pmetric.Metric) {
	if ms == (pmetric.MetricSlice{}) {
		rm := md.ResourceMetrics().AppendEmpty()
		resAttrs.CopyTo(rm.Resource().Attributes())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(st.set.ScopeName)
		sm.Scope().SetVersion(st.set.ScopeVersion)
		ms = sm.Metrics()
	}
	m := ms.AppendEmpty()
	m.SetName(spec.Name)
	m.SetDescription(spec.Description)
	m.SetUnit(spec.Unit)
	return ms, m
}
