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

// MaxDepth bounds how deep a scrub looks into kvlist and array values. A
// kvlist or array nested deeper is emptied whole: what it holds cannot be
// checked, and no instrumentation nests content that deep.
const MaxDepth = 16

// NestedKeys are keys that carry content inside a kvlist or array value,
// however the attribute holding them is named: the message shapes of the
// GenAI instrumentations ({"role", "content"}, {"type": "text", "content"},
// parts, tool call arguments and results) and of prompt templates. At the top
// level of a span or record these words are too generic to remove.
var NestedKeys = []string{
	"content", "text", "prompt", "completion", "messages", "parts",
	"arguments", "result", "input", "output",
}

var nestedKeys = NewMatcher(NestedKeys)

// Map removes content from m and returns how many keys and values it took
// out: keys matching the list, and inside kvlist and array values, to
// MaxDepth, also NestedKeys and keys whose dotted suffix is listed
// (data.gen_ai.prompt). It walks m once to check it and
// edits it only when there is something to remove: most maps carry nothing.
func (s *Scrubber) Map(m pcommon.Map) int { return s.mapAt(m, 0) }

func (s *Scrubber) mapAt(m pcommon.Map, depth int) int {
	n := 0
	nested := false
	for k, v := range m.All() {
		if s.matchKey(k, depth) {
			n++
			continue
		}
		if t := v.Type(); t == pcommon.ValueTypeMap || t == pcommon.ValueTypeSlice {
			nested = true
		}
	}
	if n > 0 {
		m.RemoveIf(func(k string, _ pcommon.Value) bool {
			return s.matchKey(k, depth)
		})
	}
	if nested {
		for _, v := range m.All() {
			n += s.value(v, depth+1)
		}
	}
	return n
}

// value scrubs a kvlist or array value found at depth.
func (s *Scrubber) value(v pcommon.Value, depth int) int {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		if depth > MaxDepth {
			if v.Map().Len() == 0 {
				return 0
			}
			v.Map().Clear()
			return 1
		}
		return s.mapAt(v.Map(), depth)
	case pcommon.ValueTypeSlice:
		sl := v.Slice()
		if depth > MaxDepth {
			if sl.Len() == 0 {
				return 0
			}
			sl.RemoveIf(func(pcommon.Value) bool { return true })
			return 1
		}
		n := 0
		for i := 0; i < sl.Len(); i++ {
			n += s.value(sl.At(i), depth+1)
		}
		return n
	}
	return 0
}

// matchKey reports whether key names content at depth: on the list, or,
// nested, one of NestedKeys or a key with a listed dotted suffix
// (data.gen_ai.prompt). Top-level keys get no suffix check: it would cost
// every span three more lookups per attribute, and instrumentations' top-level
// keys are listed whole.
func (s *Scrubber) matchKey(key string, depth int) bool {
	if s.attrs.Match(key) {
		return true
	}
	if depth == 0 {
		return false
	}
	if nestedKeys.Match(key) {
		return true
	}
	for i := 0; i < len(key); i++ {
		if key[i] == '.' && s.attrs.Match(key[i+1:]) {
			return true
		}
	}
	return false
}

// Labels removes the kvlist, array and bytes values from m, the attributes of
// a datapoint or a resource: exporters turn them into label text (Prometheus
// writes a kvlist as JSON), where no content check reaches, and no label
// needs one. It returns how many it removed.
func Labels(m pcommon.Map) int {
	n := 0
	for _, v := range m.All() {
		if composite(v) {
			n++
		}
	}
	if n > 0 {
		m.RemoveIf(func(_ string, v pcommon.Value) bool { return composite(v) })
	}
	return n
}

func composite(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice, pcommon.ValueTypeBytes:
		return true
	}
	return false
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
	} else {
		// A structured body is a message: its keys are nested ones.
		r.Attributes += s.value(lr.Body(), 1)
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
// resource and scope attributes; datapoint and resource attributes, which
// become labels, also lose their kvlist, array and bytes values (Labels).
func (s *Scrubber) Metrics(md pmetric.Metrics) Removed {
	var r Removed
	for _, rm := range md.ResourceMetrics().All() {
		r.Attributes += s.Map(rm.Resource().Attributes()) + Labels(rm.Resource().Attributes())
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
			n += s.labels(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			n += s.labels(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeHistogram:
		for _, dp := range m.Histogram().DataPoints().All() {
			n += s.labels(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for _, dp := range m.ExponentialHistogram().DataPoints().All() {
			n += s.labels(dp.Attributes()) + s.exemplars(dp.Exemplars())
		}
	case pmetric.MetricTypeSummary:
		for _, dp := range m.Summary().DataPoints().All() {
			n += s.labels(dp.Attributes())
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

func (s *Scrubber) labels(m pcommon.Map) int { return s.Map(m) + Labels(m) }
