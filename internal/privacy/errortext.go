// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy // import "github.com/inferprof/inferprof/internal/privacy"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Error text: span status messages and the exception.message /
// exception.stacktrace attributes. Instrumentations fill them with str(e) of
// whatever was raised, and the errors of an LLM call quote request content
// (sources and the full table in docs/privacy.md):
//   - the openai client's APIStatusError is "Error code: N - {body}"
//     (openai-python _base_client.py, 3.3.1), and engines echo content into
//     that body: TGI's tool-call parse error quotes the generated text
//     (router/src/chat.rs parse_output @db931fcf, returned as the 422 body by
//     server.rs), vLLM's and SGLang's request-validation handlers append
//     str(exc.errors()), whose entries carry the offending input;
//   - OpenLLMetry (0.62.1), OpenInference openai (0.1.54) and
//     opentelemetry-instrumentation-openai-v2 / util-genai (@466ae4c0) put
//     str(e) into the status and record_exception adds it, and the traceback
//     that ends with it, to an exception event (opentelemetry-sdk
//     trace/__init__.py record_exception);
//   - OpenInference LangChain sets the status to LangChain's run.error, the
//     whole traceback; LangChain's output parsers raise "Failed to parse X
//     from completion {json}" (langchain_core output_parsers/pydantic.py);
//   - the openai-agents processors (OpenInference 2.0.0, contrib
//     openai-agents-v2 @466ae4c0) write "{message}: {data}", and the agents
//     SDK (0.22.0) puts str(e) of tool and model errors in data by default;
//   - the OpenTelemetry API's use_span sets "{Type}: {e}" on every span the
//     exception passes through, so an HTTP server span with no GenAI
//     attribute carries the same text, and the logging handler copies
//     str(e) and the traceback onto log records.
//
// The text cannot be told apart from harmless error text by the span that
// carries it, so every one is replaced by ErrorTextMarker. The status code,
// exception.type, error.type and the events themselves stay: a reader still
// sees that, where and what kind of error happened.

// ErrorTextMarker replaces error text. It says who removed it, so nobody
// hunts for a bug in the instrumentation.
const ErrorTextMarker = "[removed by inferprof: error text can quote prompts]"

// ErrorTextAttributes are the attributes whose values are error text, on
// spans (Rust's tracing-opentelemetry can propagate them there), span events
// and log records.
var ErrorTextAttributes = []string{"exception.message", "exception.stacktrace"}

// errorText replaces the values of ErrorTextAttributes in m and returns how
// many it replaced; a value already replaced is not counted again, so a
// second privacy processor (agent, then gateway) counts nothing.
func errorText(m pcommon.Map) int {
	n := 0
	for _, k := range ErrorTextAttributes {
		v, ok := m.Get(k)
		if !ok || v.Type() == pcommon.ValueTypeEmpty || (v.Type() == pcommon.ValueTypeStr && v.Str() == ErrorTextMarker) {
			continue
		}
		// tracing-opentelemetry writes the stacktrace as an array (the
		// error's source chain); the marker replaces it whatever its type.
		v.SetStr(ErrorTextMarker)
		n++
	}
	return n
}

// SpanErrorText replaces the span's status message and the error text of the
// span and its events, and returns how many texts it replaced.
func SpanErrorText(span ptrace.Span) int {
	n := errorText(span.Attributes())
	if msg := span.Status().Message(); msg != "" && msg != ErrorTextMarker {
		span.Status().SetMessage(ErrorTextMarker)
		n++
	}
	for _, e := range span.Events().All() {
		n += errorText(e.Attributes())
	}
	return n
}
