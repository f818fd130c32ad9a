// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrecording // import "github.com/inferprof/inferprof/internal/agentrecording"

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// EngineRequest is one llm_request as vLLM wrote it in the recording.
type EngineRequest struct {
	Start, End             time.Time
	Queue, Prefill, Decode float64 // seconds
}

// EngineRequests reads vLLM's llm_request spans from the recording's
// batches themselves, not from the collector's output: the engine's own
// figures, by trace id. A request without one of its latencies is an error.
func EngineRequests(batches []ptrace.Traces) (map[string][]EngineRequest, error) {
	out := map[string][]EngineRequest{}
	for _, td := range batches {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if s.Name() != "llm_request" {
						continue
					}
					var l [3]float64
					for i, k := range []string{"gen_ai.latency.time_in_queue", "gen_ai.latency.time_in_model_prefill", "gen_ai.latency.time_in_model_decode"} {
						v, ok := s.Attributes().Get(k)
						if !ok {
							return nil, fmt.Errorf("llm_request %s without %s", s.SpanID(), k)
						}
						l[i] = v.Double()
					}
					id := s.TraceID().String()
					out[id] = append(out[id], EngineRequest{
						Start: s.StartTimestamp().AsTime(), End: s.EndTimestamp().AsTime(),
						Queue: l[0], Prefill: l[1], Decode: l[2],
					})
				}
			}
		}
	}
	return out, nil
}

// MatchRequest is the request of reqs that lies inside the call's span.
func MatchRequest(reqs []EngineRequest, call Span) (EngineRequest, bool) {
	from, to, err := call.Times()
	if err != nil {
		return EngineRequest{}, false
	}
	for _, r := range reqs {
		if !r.Start.Before(from) && !r.End.After(to) {
			return r, true
		}
	}
	return EngineRequest{}, false
}

// SpanRole says model or tool from the attributes each instrumentation
// writes (gen_ai.operation.name, OpenInference's span kind), not from the
// collector's reading; otherwise "neither" with the span's name.
func SpanRole(s Span) string {
	switch s.Attributes["gen_ai.operation.name"] {
	case "execute_tool":
		return "tool"
	case "chat", "text_completion", "generate_content":
		return "model"
	}
	switch s.Attributes["openinference.span.kind"] {
	case "TOOL":
		return "tool"
	case "LLM":
		return "model"
	}
	return fmt.Sprintf("neither (%q)", s.Name)
}

// IsRun: the collector gave the span a run's figures.
func IsRun(s Span) bool {
	_, ok := s.Attributes[names.AttrAgentTimeInModel]
	return ok
}

// maxDepth bounds the walks up a trace, against a parent cycle in bad
// input.
const maxDepth = 64

// ByID indexes spans by span id.
func ByID(spans []Span) map[string]Span {
	m := make(map[string]Span, len(spans))
	for _, s := range spans {
		m[s.SpanID] = s
	}
	return m
}

// TopRuns are the runs with figures whose ancestors are no run with
// figures, in start order (then name, id): one per turn of agent.py.
func TopRuns(spans []Span) []Span {
	byID := ByID(spans)
	var out []Span
	for _, s := range spans {
		if IsRun(s) && !runAbove(byID, s) {
			out = append(out, s)
		}
	}
	SortByStart(out)
	return out
}

func runAbove(byID map[string]Span, s Span) bool {
	for p, n := s.ParentSpanID, 0; p != "" && n < maxDepth; n++ {
		up, ok := byID[p]
		if !ok {
			return false
		}
		if IsRun(up) {
			return true
		}
		p = up.ParentSpanID
	}
	return false
}

// Descends: s descends from the span with id ancestor (byID is ByID of the
// trace's spans).
func Descends(byID map[string]Span, s Span, ancestor string) bool {
	for p, n := s.ParentSpanID, 0; p != "" && n < maxDepth; n++ {
		if p == ancestor {
			return true
		}
		up, ok := byID[p]
		if !ok {
			return false
		}
		p = up.ParentSpanID
	}
	return false
}

// ChildNamed is the span named name under run in run's trace, through the
// spans between (chains, graph nodes), as the bottleneck is defined.
func ChildNamed(spans []Span, byID map[string]Span, run Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name && s.TraceID == run.TraceID && s.SpanID != run.SpanID && Descends(byID, s, run.SpanID) {
			return s, true
		}
	}
	return Span{}, false
}
