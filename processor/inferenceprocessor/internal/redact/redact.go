// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package redact removes prompt and completion content from spans.
package redact // import "github.com/inferprof/inferprof/processor/inferenceprocessor/internal/redact"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// DefaultAttributes are the content keys removed by default: prompts,
// outputs, system instructions, tool arguments and results, retrieved
// documents. A trailing "*" matches a prefix. Where each comes from (see
// ../../testdata/agents/README.md for the versions read):
//   - GenAI semconv (semantic-conventions-genai model/gen-ai/spans.yaml):
//     the opt-in gen_ai.input.messages, gen_ai.output.messages,
//     gen_ai.system_instructions, gen_ai.tool.definitions,
//     gen_ai.tool.call.arguments / .result, gen_ai.retrieval.query.text,
//     gen_ai.retrieval.documents, gen_ai.memory.query.text,
//     gen_ai.memory.records; the removed gen_ai.prompt / gen_ai.completion.
//   - contrib openai-agents-v2 span_processor.py: the semconv keys, plus
//     gen_ai.orchestrator.agent.definitions (agent system messages),
//     gen_ai.transcription.text and gen_ai.speech.input_text.
//   - OpenLLMetry LangChain callback_handler.py 0.62.1: traceloop.entity.input
//     / .output and gen_ai.task.input / .output (chain, task and tool
//     inputs and outputs), gen_ai.prompt.{i}.* / gen_ai.completion.{i}.* in
//     older releases, llm.prompts.
//   - OpenInference semconv trace/__init__.py: input.value, output.value,
//     llm.input_messages.*, llm.output_messages.*, llm.prompts, llm.choices,
//     llm.prompt_template.*, llm.function_call, llm.tools, retrieval.documents.*,
//     llm.invocation_parameters (the openai-agents processor dumps the
//     Responses request into it, instructions included),
//     document.content, reranker.query, reranker.input_documents /
//     .output_documents, embedding.embeddings (embedding.text within);
//     message.* and message_content.* as top-level keys too.
//
// None matches a token count (gen_ai.usage.*, llm.token_count.*) or a name
// the agent figures read (gen_ai.agent.name, tool.name, agent.name).
var DefaultAttributes = []string{
	"gen_ai.prompt*",
	"gen_ai.completion*",
	"gen_ai.input.messages",
	"gen_ai.output.messages",
	"gen_ai.system_instructions",
	"gen_ai.tool.definitions",
	"gen_ai.tool.call.arguments",
	"gen_ai.tool.call.result",
	"gen_ai.retrieval.query.text",
	"gen_ai.retrieval.documents",
	"gen_ai.memory.query.text",
	"gen_ai.memory.records",
	"gen_ai.orchestrator.agent.definitions",
	"gen_ai.transcription.text",
	"gen_ai.speech.input_text",
	"gen_ai.task.input",
	"gen_ai.task.output",
	"traceloop.entity.input",
	"traceloop.entity.output",
	"llm.prompts*",
	"llm.completions*",
	"llm.choices*",
	"llm.input_messages*",
	"llm.output_messages*",
	"llm.prompt_template*",
	"llm.function_call",
	"llm.invocation_parameters",
	"llm.tools*",
	"input.value",
	"output.value",
	"message.content*",
	"message_content.*",
	"document.content",
	"retrieval.documents*",
	"reranker.query",
	"reranker.input_documents*",
	"reranker.output_documents*",
	"embedding.embeddings*",
}

// DefaultEvents are the content span events removed by default: the GenAI
// semconv message events, old and new (gen_ai.developer.message is what
// the contrib openai-v2 instrumentation names developer-role messages).
var DefaultEvents = []string{
	"gen_ai.content.prompt",
	"gen_ai.content.completion",
	"gen_ai.system.message",
	"gen_ai.developer.message",
	"gen_ai.user.message",
	"gen_ai.assistant.message",
	"gen_ai.tool.message",
	"gen_ai.choice",
	"gen_ai.client.inference.operation.details",
}

// Matcher matches keys against exact names and prefixes.
type Matcher struct {
	// exact holds the exact names by length: a key is compared only with
	// names of its own length, and most keys have none. A few string
	// compares beat hashing the key for a map lookup.
	exact    [][]string
	prefixes []prefix
	minLen   int // shortest pattern body; shorter keys cannot match
}

// prefix is a "x*" pattern's body with its last byte, compared first: most
// keys share "gen_ai." with the patterns and differ further on, so one byte
// rejects them without a call to compare the whole prefix.
type prefix struct {
	body string
	last byte
}

// NewMatcher compiles patterns; "x*" matches every key starting with "x".
func NewMatcher(patterns []string) *Matcher {
	m := &Matcher{minLen: -1}
	for _, p := range patterns {
		body, isPrefix := strings.CutSuffix(p, "*")
		if m.minLen < 0 || len(body) < m.minLen {
			m.minLen = len(body)
		}
		if isPrefix {
			var last byte
			if body != "" {
				last = body[len(body)-1]
			}
			m.prefixes = append(m.prefixes, prefix{body: body, last: last})
			continue
		}
		if len(p) >= len(m.exact) {
			m.exact = append(m.exact, make([][]string, len(p)+1-len(m.exact))...)
		}
		m.exact[len(p)] = append(m.exact[len(p)], p)
	}
	if m.minLen < 0 {
		m.minLen = 0
	}
	return m
}

// Match reports whether key matches a pattern.
func (m *Matcher) Match(key string) bool {
	if len(key) < m.minLen {
		return false
	}
	if len(key) < len(m.exact) {
		for _, e := range m.exact[len(key)] {
			if key == e {
				return true
			}
		}
	}
	for _, p := range m.prefixes {
		n := len(p.body)
		if n == 0 || (len(key) >= n && key[n-1] == p.last && key[:n] == p.body) {
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

// AttributeMatcher matches the content attribute keys.
func (r *Redactor) AttributeMatcher() *Matcher { return r.attrs }

// Span removes content attributes from the span and its events, and
// content events. It returns how many attributes and events it removed.
func (r *Redactor) Span(span ptrace.Span) (attrs, events int) {
	attrs, events = r.Events(span)
	return attrs + r.Attributes(span.Attributes()), events
}

// Attributes removes content attributes from m and returns how many.
func (r *Redactor) Attributes(m pcommon.Map) int {
	return r.removeAttrs(m)
}

// Events removes content events from the span, and content attributes from
// its other events. It returns how many attributes and events it removed.
func (r *Redactor) Events(span ptrace.Span) (attrs, events int) {
	evs := span.Events()
	if evs.Len() == 0 {
		return attrs, 0
	}
	for i := 0; i < evs.Len(); i++ {
		if r.events.Match(evs.At(i).Name()) {
			events++
		}
	}
	if events > 0 {
		evs.RemoveIf(func(e ptrace.SpanEvent) bool {
			return r.events.Match(e.Name())
		})
	}
	for i := 0; i < evs.Len(); i++ {
		attrs += r.removeAttrs(evs.At(i).Attributes())
	}
	return attrs, events
}

// removeAttrs walks m once to count the content keys, and edits it only
// when there are some: most spans carry none.
func (r *Redactor) removeAttrs(m pcommon.Map) int {
	n := 0
	for k := range m.All() {
		if r.attrs.Match(k) {
			n++
		}
	}
	if n > 0 {
		m.RemoveIf(func(k string, _ pcommon.Value) bool {
			return r.attrs.Match(k)
		})
	}
	return n
}
