// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package redact removes prompt and completion content from spans, with
// inferprof's one content list (internal/privacy).
package redact // import "github.com/inferprof/inferprof/processor/inferenceprocessor/internal/redact"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/privacy"
)

// DefaultAttributes are the content keys removed by default: privacy.Attributes.
var DefaultAttributes = privacy.Attributes

// DefaultEvents are the content span events removed by default: privacy.Events.
var DefaultEvents = privacy.Events

// Matcher matches keys against exact names and "x*" prefixes.
type Matcher = privacy.Matcher

// NewMatcher compiles patterns; "x*" matches every key starting with "x".
func NewMatcher(patterns []string) *Matcher { return privacy.NewMatcher(patterns) }

// Redactor removes content from a span.
type Redactor struct{ s *privacy.Scrubber }

// New returns a redactor for the given attribute and event patterns.
func New(attrs, events []string) *Redactor {
	return &Redactor{s: privacy.NewScrubber(attrs, events)}
}

// AttributeMatcher matches the content attribute keys.
func (r *Redactor) AttributeMatcher() *Matcher { return r.s.AttributeMatcher() }

// Span removes content attributes from the span and its events, and
// content events. It returns how many attributes and events it removed.
func (r *Redactor) Span(span ptrace.Span) (attrs, events int) {
	attrs, events = r.Events(span)
	return attrs + r.Attributes(span.Attributes()), events
}

// Attributes removes content attributes from m and returns how many.
func (r *Redactor) Attributes(m pcommon.Map) int { return r.s.Map(m) }

// Events removes content events from the span, and content attributes from
// its other events. It returns how many attributes and events it removed.
func (r *Redactor) Events(span ptrace.Span) (attrs, events int) {
	rm := r.s.SpanEvents(span)
	return rm.Attributes, rm.Events
}
