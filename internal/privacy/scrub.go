// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy // import "github.com/inferprof/inferprof/internal/privacy"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Removed counts what a scrub took out.
type Removed struct {
	Attributes int // attributes, and body map keys, removed
	Events     int // span events removed
	Bodies     int // log bodies of content events cleared
	ErrorTexts int // status messages and exception texts replaced by ErrorTextMarker
}

// Add accumulates o into r.
func (r *Removed) Add(o Removed) {
	r.Attributes += o.Attributes
	r.Events += o.Events
	r.Bodies += o.Bodies
	r.ErrorTexts += o.ErrorTexts
}

// Scrubber removes content from pdata in place.
type Scrubber struct {
	attrs  *Matcher
	events *Matcher
}

// NewScrubber returns a scrubber for the given attribute and event patterns.
func NewScrubber(attrs, events []string) *Scrubber {
	return &Scrubber{attrs: NewMatcher(attrs), events: NewMatcher(events)}
}

// DefaultScrubber scrubs with Attributes and Events.
func DefaultScrubber() *Scrubber {
	return &Scrubber{attrs: defaultAttributes, events: defaultEvents}
}

// AttributeMatcher matches the content attribute keys.
func (s *Scrubber) AttributeMatcher() *Matcher { return s.attrs }

// Map removes content keys from m and returns how many. It walks m once to
// count them and edits it only when there are some: most maps carry none.
func (s *Scrubber) Map(m pcommon.Map) int {
	n := 0
	for k := range m.All() {
		if s.attrs.Match(k) {
			n++
		}
	}
	if n > 0 {
		m.RemoveIf(func(k string, _ pcommon.Value) bool {
			return s.attrs.Match(k)
		})
	}
	return n
}

// SpanEvents removes content events from span, and content attributes from
// its other events.
func (s *Scrubber) SpanEvents(span ptrace.Span) Removed {
	var r Removed
	evs := span.Events()
	if evs.Len() == 0 {
		return r
	}
	for i := 0; i < evs.Len(); i++ {
		if s.events.Match(evs.At(i).Name()) {
			r.Events++
		}
	}
	if r.Events > 0 {
		evs.RemoveIf(func(e ptrace.SpanEvent) bool {
			return s.events.Match(e.Name())
		})
	}
	for i := 0; i < evs.Len(); i++ {
		r.Attributes += s.Map(evs.At(i).Attributes())
	}
	return r
}

// Span removes content from a span: its attributes, events and links, and
// its error text (SpanErrorText).
func (s *Scrubber) Span(span ptrace.Span) Removed {
	r := s.SpanEvents(span)
	r.Attributes += s.Map(span.Attributes())
	r.ErrorTexts += SpanErrorText(span)
	for i := 0; i < span.Links().Len(); i++ {
		r.Attributes += s.Map(span.Links().At(i).Attributes())
	}
	return r
}

// Traces scrubs every span, and resource and scope attributes.
func (s *Scrubber) Traces(td ptrace.Traces) Removed {
	var r Removed
	for _, rs := range td.ResourceSpans().All() {
		r.Attributes += s.Map(rs.Resource().Attributes())
		for _, ss := range rs.ScopeSpans().All() {
			r.Attributes += s.Map(ss.Scope().Attributes())
			for _, span := range ss.Spans().All() {
				r.Add(s.Span(span))
			}
		}
	}
	return r
}

// LogRecord removes content from a log record: content attributes, content
// keys of a map body, the whole body of a content event, whatever its type
// (the OpenAI instrumentation sends maps; others send JSON strings), and the
// error text the Python logging handler copies from exc_info.
func (s *Scrubber) LogRecord(lr plog.LogRecord) Removed {
	var r Removed
	if s.isContentEvent(lr) {
		if lr.Body().Type() != pcommon.ValueTypeEmpty {
			pcommon.NewValueEmpty().CopyTo(lr.Body())
			r.Bodies++
		}
	} else if lr.Body().Type() == pcommon.ValueTypeMap {
		r.Attributes += s.Map(lr.Body().Map())
	}
	r.Attributes += s.Map(lr.Attributes())
	r.ErrorTexts += errorText(lr.Attributes())
	return r
}

// IsContentLogRecord reports whether lr is a content event (by its event
// name) under the default list, for exporters that must not send one even
// where no scrubbing processor ran before them.
func IsContentLogRecord(lr plog.LogRecord) bool {
	return (&Scrubber{events: defaultEvents}).isContentEvent(lr)
}

func (s *Scrubber) isContentEvent(lr plog.LogRecord) bool {
	if name := lr.EventName(); name != "" {
		return s.events.Match(name)
	}
	if v, ok := lr.Attributes().Get(EventNameAttribute); ok && v.Type() == pcommon.ValueTypeStr {
		return s.events.Match(v.Str())
	}
	return false
}

// Logs scrubs every log record, and resource and scope attributes.
func (s *Scrubber) Logs(ld plog.Logs) Removed {
	var r Removed
	for _, rl := range ld.ResourceLogs().All() {
		r.Attributes += s.Map(rl.Resource().Attributes())
		for _, sl := range rl.ScopeLogs().All() {
			r.Attributes += s.Map(sl.Scope().Attributes())
			for _, lr := range sl.LogRecords().All() {
				r.Add(s.LogRecord(lr))
			}
		}
	}
	return r
}

// Metrics scrubs the attributes of every datapoint and exemplar, and
// resource and scope attributes.
func (s *Scrubber) Metrics(md pmetric.Metrics) Removed {
	var r Removed
	for _, rm := range md.ResourceMetrics().All() {
		r.Attributes += s.Map(rm.Resource().Attributes())
		for _, sm := range rm.ScopeMetrics().All() {
			r.Attributes += s.Map(sm.Scope().Attributes())
			for _, m := range sm.Metrics().All() {
				r.Attributes += s.metric(m)
			}
		}
	}
	return r
}

func (s *Scrubber) metric(m pmetric.Metric) int {
	n := 0
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for _, dp := range m.Gauge().DataPoints().All() {
			n += s.Map(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			n += s.Map(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeHistogram:
		for _, dp := range m.Histogram().DataPoints().All() {
			n += s.Map(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for _, dp := range m.ExponentialHistogram().DataPoints().All() {
			n += s.Map(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeSummary:
		for _, dp := range m.Summary().DataPoints().All() {
			n += s.Map(dp.Attributes())
		}
	}
	return n
}

func (s *Scrubber) exemplars(es pmetric.ExemplarSlice) int {
	n := 0
	for _, e := range es.All() {
		n += s.Map(e.FilteredAttributes())
	}
	return n
}
