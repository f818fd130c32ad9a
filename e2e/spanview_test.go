// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// goldenSpan is a flat, order-independent view of one span, for the agent
// tests' assertions (agent_test.go, agents_recorded_test.go). The engine
// goldens are pkg/golden files compared with ptracetest (checkEngine).
type goldenSpan struct {
	Resource     map[string]any `json:"resource"`
	Name         string         `json:"name"`
	TraceID      string         `json:"trace_id"`
	SpanID       string         `json:"span_id"`
	ParentSpanID string         `json:"parent_span_id,omitempty"`
	Kind         string         `json:"kind"`
	Start        string         `json:"start"`
	End          string         `json:"end"`
	Status       string         `json:"status,omitempty"`
	Attributes   map[string]any `json:"attributes"`
	Events       []goldenEvent  `json:"events,omitempty"`
}

type goldenEvent struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

func (s goldenSpan) duration() float64 {
	a, errA := time.Parse(time.RFC3339Nano, s.Start)
	b, errB := time.Parse(time.RFC3339Nano, s.End)
	if errA != nil || errB != nil || !b.After(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

// flattenSpans is the goldenSpan view of what the sink received.
func flattenSpans(tds ...ptrace.Traces) []goldenSpan {
	var out []goldenSpan
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					g := goldenSpan{
						Resource: rs.Resource().Attributes().AsRaw(), Name: s.Name(),
						TraceID: s.TraceID().String(), SpanID: s.SpanID().String(), ParentSpanID: s.ParentSpanID().String(),
						Kind:  s.Kind().String(),
						Start: s.StartTimestamp().AsTime().Format(time.RFC3339Nano), End: s.EndTimestamp().AsTime().Format(time.RFC3339Nano),
						Attributes: s.Attributes().AsRaw(),
					}
					if s.Status().Code() != ptrace.StatusCodeUnset {
						g.Status = s.Status().Code().String() + ": " + s.Status().Message()
					}
					for _, ev := range s.Events().All() {
						g.Events = append(g.Events, goldenEvent{Name: ev.Name(), Attributes: ev.Attributes().AsRaw()})
					}
					out = append(out, g)
				}
			}
		}
	}
	sortSpans(out)
	return out
}

func sortSpans(out []goldenSpan) {
	sort.Slice(out, func(a, b int) bool {
		if out[a].Start != out[b].Start {
			return out[a].Start < out[b].Start
		}
		if out[a].Name != out[b].Name {
			return out[a].Name < out[b].Name
		}
		return out[a].SpanID < out[b].SpanID
	})
}
