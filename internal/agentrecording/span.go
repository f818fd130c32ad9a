// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrecording // import "github.com/inferprof/inferprof/internal/agentrecording"

import (
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Span is a flat, order-independent view of one span, for assertions on one
// span's attributes (the goldens themselves are pkg/golden files compared
// with ptracetest, see internal/goldentest).
type Span struct {
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
	Events       []Event        `json:"events,omitempty"`
}

// Event is one span event in the Span view.
type Event struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// Times parses the span's start and end.
func (s Span) Times() (start, end time.Time, err error) {
	if start, err = time.Parse(time.RFC3339Nano, s.Start); err != nil {
		return start, end, err
	}
	end, err = time.Parse(time.RFC3339Nano, s.End)
	return start, end, err
}

// Seconds is the span's duration; 0 where its times do not parse or it
// ends before it starts.
func (s Span) Seconds() float64 {
	a, b, err := s.Times()
	if err != nil || !b.After(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

// Flatten is the Span view of every span in tds, in (start, name, span id)
// order: the same whatever batches they came in.
func Flatten(tds ...ptrace.Traces) []Span {
	var out []Span
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					g := Span{
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
						g.Events = append(g.Events, Event{Name: ev.Name(), Attributes: ev.Attributes().AsRaw()})
					}
					out = append(out, g)
				}
			}
		}
	}
	SortByStart(out)
	return out
}

// SortByStart orders spans by start time, then name, then span id. By
// time, not by the Start text: RFC 3339 drops a zero fraction, and
// "…:40Z" sorts after "…:40.2Z" as text.
func SortByStart(spans []Span) {
	starts := make(map[string]time.Time, len(spans))
	for _, s := range spans {
		starts[s.Start], _ = time.Parse(time.RFC3339Nano, s.Start)
	}
	sort.SliceStable(spans, func(a, b int) bool {
		x, y := spans[a], spans[b]
		if !starts[x.Start].Equal(starts[y.Start]) {
			return starts[x.Start].Before(starts[y.Start])
		}
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		return x.SpanID < y.SpanID
	})
}
