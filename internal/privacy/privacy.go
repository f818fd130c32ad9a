// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package privacy is inferprof's one list of where prompts and model outputs
// travel in telemetry, and the matcher and scrubbers that remove them from
// every signal. The inference processor, the privacy processor and the
// graphsignal exporter all read it, so a name added here is removed
// everywhere.
package privacy // import "github.com/inferprof/inferprof/internal/privacy"

import (
	"errors"
	"fmt"
	"strings"
)

// Attributes are the attribute keys whose values carry prompts, outputs,
// tool arguments or results. A trailing "*" matches a prefix; matching
// ignores ASCII case. Sources, checked in each project's own code:
//   - OpenTelemetry GenAI semconv (gen-ai spans and events, v1.41.0): the
//     opt-in gen_ai.input.messages, gen_ai.output.messages,
//     gen_ai.system_instructions, gen_ai.tool.definitions,
//     gen_ai.tool.call.arguments, gen_ai.tool.call.result, and the removed
//     gen_ai.prompt / gen_ai.completion (attributes of the old
//     gen_ai.content.prompt / gen_ai.content.completion events).
//   - opentelemetry-util-genai span_utils.py (@034b5c46): the three message
//     attributes on spans and on the gen_ai.client.inference.operation.details
//     log record.
//   - OpenLLMetry: gen_ai.prompt.{i}.content, gen_ai.completion.{i}.content,
//     llm.prompts, traceloop.entity.input / traceloop.entity.output.
//   - OpenInference semconv/trace/__init__.py (@0101ec16): input.value,
//     output.value, llm.input_messages.*, llm.output_messages.*, llm.prompts,
//     llm.choices, llm.prompt_template.*, message.content,
//     message_content.*, document.content, retrieval.documents,
//     reranker.query, embedding.embeddings.
//   - Agent instrumentations (read for the inference processor's agent runs;
//     files and versions in processor/inferenceprocessor/testdata/spans/
//     README.md): GenAI semconv spans.yaml (semantic-conventions-genai
//     @002c8a6e) opt-in gen_ai.retrieval.query.text, gen_ai.retrieval.documents,
//     gen_ai.memory.query.text, gen_ai.memory.records; the contrib
//     openai-agents-v2 span_processor.py (@466ae4c0)
//     gen_ai.orchestrator.agent.definitions (agents' system messages),
//     gen_ai.transcription.text, gen_ai.speech.input_text; OpenLLMetry's
//     LangChain callback_handler.py 0.62.1 gen_ai.task.input / .output
//     (chain, task and tool inputs and outputs); OpenInference
//     llm.function_call, llm.tools.* (tool schemas), reranker.input_documents /
//     .output_documents, and llm.invocation_parameters, into which the
//     openai-agents processor (2.0.0, _processor.py) dumps the Responses
//     request, instructions included.
//   - Instrumentations outside the GenAI conventions (issue #30; sources in
//     docs/privacy.md): the Vercel AI SDK's ai.prompt, ai.prompt.messages,
//     ai.prompt.tools, ai.response.text, ai.response.toolCalls,
//     ai.response.object, ai.toolCall.args / .result; Langfuse's
//     langfuse.observation.input / .output and langfuse.trace.input /
//     .output; MLflow's mlflow.spanInputs / mlflow.spanOutputs; Pydantic
//     Logfire's all_messages_events and pydantic_ai.all_messages.
//   - Token ids, which decode back to the text: gen_ai.response.token_ids,
//     vLLM's new_token_ids (EngineCoreOutput), output_token_ids and
//     prompt_token_ids, and strands-vllm's llm.hosted_vllm.prompt_token_ids
//     / response_token_ids.
//
// Only exact and prefix patterns appear, so the list is also a valid
// default for the inference processor's privacy.attributes. None matches a
// token count (gen_ai.usage.prompt_tokens, llm.token_count.prompt).
var Attributes = []string{
	"gen_ai.prompt*",
	"gen_ai.completion*",
	"gen_ai.input.messages",
	"gen_ai.output.messages",
	"gen_ai.system_instructions",
	"gen_ai.tool.definitions",
	"gen_ai.tool.call.arguments",
	"gen_ai.tool.call.result",
	"llm.prompts*",
	"llm.completions*",
	"llm.choices*",
	"llm.input_messages*",
	"llm.output_messages*",
	"llm.prompt_template*",
	"input.value",
	"output.value",
	"message.content*",
	"message_content.*",
	"document.content",
	"retrieval.documents*",
	"reranker.query",
	"embedding.embeddings*",
	"traceloop.entity.input",
	"traceloop.entity.output",
	"gen_ai.retrieval.query.text",
	"gen_ai.retrieval.documents",
	"gen_ai.memory.query.text",
	"gen_ai.memory.records",
	"gen_ai.orchestrator.agent.definitions",
	"gen_ai.transcription.text",
	"gen_ai.speech.input_text",
	"gen_ai.task.input",
	"gen_ai.task.output",
	"llm.function_call",
	"llm.invocation_parameters",
	"llm.tools*",
	"reranker.input_documents*",
	"reranker.output_documents*",
	"ai.prompt*",
	"ai.response.text",
	"ai.response.toolCalls",
	"ai.response.object",
	"ai.response.reasoning*",
	"ai.toolCall.args",
	"ai.toolCall.result",
	"langfuse.observation.input",
	"langfuse.observation.output",
	"langfuse.trace.input",
	"langfuse.trace.output",
	"mlflow.spanInputs",
	"mlflow.spanOutputs",
	"all_messages_events",
	"pydantic_ai.all_messages",
	"gen_ai.response.token_ids",
	"new_token_ids",
	"output_token_ids",
	"prompt_token_ids",
	"llm.hosted_vllm.prompt_token_ids",
	"llm.hosted_vllm.response_token_ids",
}

// Events are the names of events whose whole payload is content: span events
// and log records (LogRecord.event_name, or the older event.name attribute).
// A span event of these names is removed; a log record keeps its metadata and
// loses its body and content attributes. Sources:
//   - GenAI semconv events (v1.36.0 and before): gen_ai.system.message,
//     gen_ai.user.message, gen_ai.assistant.message, gen_ai.tool.message,
//     gen_ai.choice; later gen_ai.client.inference.operation.details.
//   - opentelemetry-instrumentation-openai-v2 utils.py (@0047a962):
//     message_to_event names records gen_ai.{role}.message for every role
//     it sees, developer included, with body {"content": ...} or
//     {"tool_calls": [{"function": {"arguments": ...}}]}; choice_to_event
//     names gen_ai.choice with body {"index", "finish_reason", "message"}.
//   - The old span events gen_ai.content.prompt / gen_ai.content.completion.
var Events = []string{
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

// EventNameAttribute is where log records from SDKs older than
// LogRecord.event_name carry the event name.
const EventNameAttribute = "event.name"

// Matcher matches keys against exact names and prefixes, ignoring ASCII case.
type Matcher struct {
	// exact holds the exact names by length: a key is compared only with
	// names of its own length, and most keys have none. A few compares beat
	// hashing the key for a map lookup.
	exact [][]exactName
	// prefixes holds the "x*" patterns by their body's first byte, lowered:
	// a key is compared only with those that start like it (most keys start
	// "gen_ai." and meet two of them, not all).
	prefixes [256][]prefix
	matchAll bool // a bare "*"
	minLen   int  // shortest pattern body; shorter keys cannot match
}

// exactName is an exact pattern with its last byte, lowered, compared first
// (as prefix does): names of one length mostly differ at the end, so that
// byte rejects a key without a case-folding compare.
type exactName struct {
	name string
	last byte
}

// prefix is a "x*" pattern's body with its last byte, compared first: most
// keys share "gen_ai." with the patterns and differ further on, so one byte
// rejects them without comparing the whole prefix.
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
				last = lower(body[len(body)-1])
			}
			if body == "" {
				m.matchAll = true
				continue
			}
			first := lower(body[0])
			m.prefixes[first] = append(m.prefixes[first], prefix{body: body, last: last})
			continue
		}
		if len(p) >= len(m.exact) {
			m.exact = append(m.exact, make([][]exactName, len(p)+1-len(m.exact))...)
		}
		e := exactName{name: p}
		if p != "" {
			e.last = lower(p[len(p)-1])
		}
		m.exact[len(p)] = append(m.exact[len(p)], e)
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
			if (key == "" || lower(key[len(key)-1]) == e.last) && strings.EqualFold(key, e.name) {
				return true
			}
		}
	}
	if m.matchAll {
		return true
	}
	if key == "" {
		return false
	}
	for _, p := range m.prefixes[lower(key[0])] {
		n := len(p.body)
		if len(key) >= n && lower(key[n-1]) == p.last && strings.EqualFold(key[:n], p.body) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

var (
	defaultAttributes = NewMatcher(Attributes)
	defaultEvents     = NewMatcher(Events)
)

// IsContentKey reports whether an attribute key is on the Attributes list.
func IsContentKey(key string) bool { return defaultAttributes.Match(key) }

// IsContentEvent reports whether an event name is on the Events list.
func IsContentEvent(name string) bool { return defaultEvents.Match(name) }

// ValidatePatterns rejects empty patterns, one that matches everything, and
// a "*" anywhere but the end; key names the YAML key in the messages.
func ValidatePatterns(key string, patterns []string) error {
	var errs []error
	for _, p := range patterns {
		body := strings.TrimSuffix(p, "*")
		switch {
		case body == "":
			errs = append(errs, fmt.Errorf("%s: pattern %q matches everything", key, p))
		case strings.Contains(body, "*"):
			errs = append(errs, fmt.Errorf("%s: pattern %q may only end in *", key, p))
		}
	}
	return errors.Join(errs...)
}
