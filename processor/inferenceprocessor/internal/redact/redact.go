// Package redact removes prompt and completion content from spans.
package redact // import "github.com/inferprof/inferprof/processor/inferenceprocessor/internal/redact"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// DefaultAttributes are the content keys removed by default. A trailing "*"
// matches a prefix.
var DefaultAttributes = []string{
	"gen_ai.prompt*",
	"gen_ai.completion*",
	"gen_ai.input.messages",
	"gen_ai.output.messages",
	"gen_ai.system_instructions",
	"gen_ai.tool.call.arguments",
	"gen_ai.tool.call.result",
	"llm.prompts",
	"llm.completions",
}

// DefaultEvents are the content span events removed by default: the GenAI
// semconv message events, old and new.
var DefaultEvents = []string{
	"gen_ai.content.prompt",
	"gen_ai.content.completion",
	"gen_ai.system.message",
	"gen_ai.user.message",
	"gen_ai.assistant.message",
	"gen_ai.tool.message",
	"gen_ai.choice",
	"gen_ai.client.inference.operation.details",
}

// Matcher matches keys against exact names and prefixes.
type Matcher struct {
	exact    map[string]bool
	lengths  [256]bool // lengths of exact keys; most keys skip the map lookup
	long     bool      // an exact key is 256 bytes or longer
	prefixes []string
}

// NewMatcher compiles patterns; "x*" matches every key starting with "x".
func NewMatcher(patterns []string) *Matcher {
	m := &Matcher{exact: map[string]bool{}}
	for _, p := range patterns {
		if body, ok := strings.CutSuffix(p, "*"); ok {
			m.prefixes = append(m.prefixes, body)
		} else {
			m.exact[p] = true
			if len(p) < len(m.lengths) {
				m.lengths[len(p)] = true
			} else {
				m.long = true
			}
		}
	}
	return m
}

// Match reports whether key matches a pattern.
func (m *Matcher) Match(key string) bool {
	if n := len(key); (n < len(m.lengths) && m.lengths[n]) || (n >= len(m.lengths) && m.long) {
		if m.exact[key] {
			return true
		}
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// Redactor removes content from a span.
type Redactor struct {
	attrs  *Matcher
	events *Matcher
}

// New returns a redactor for the given attribute and event patterns.
func New(attrs, events []string) *Redactor {
	return &Redactor{attrs: NewMatcher(attrs), events: NewMatcher(events)}
}

// Span removes content attributes from the span and its events, and
// content events. It returns how many attributes and events it removed.
func (r *Redactor) Span(span ptrace.Span) (attrs, events int) {
	attrs = r.removeAttrs(span.Attributes())
	evs := span.Events()
	evs.RemoveIf(func(e ptrace.SpanEvent) bool {
		if r.events.Match(e.Name()) {
			events++
			return true
		}
		return false
	})
	for i := 0; i < evs.Len(); i++ {
		attrs += r.removeAttrs(evs.At(i).Attributes())
	}
	return attrs, events
}

func (r *Redactor) removeAttrs(m pcommon.Map) int {
	n := 0
	m.RemoveIf(func(k string, _ pcommon.Value) bool {
		if r.attrs.Match(k) {
			n++
			return true
		}
		return false
	})
	return n
}
