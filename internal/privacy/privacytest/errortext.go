// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package privacytest builds telemetry that carries request content in error
// text, in the shapes real instrumentations write it, for the privacy tests
// of internal/privacy, the privacy processor and the end-to-end suite. Each
// builder cites the code it follows; docs/privacy.md has the full table.
package privacytest // import "github.com/inferprof/inferprof/internal/privacy/privacytest"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// OpenAIStatusError is str(e) of the openai client's error when TGI cannot
// parse a tool call out of the generated text. TGI (router/src/chat.rs
// parse_output @db931fcf) builds InferError::ToolError(format!("Failed to
// parse generated text: {} {:?}", e, generated_text)); server.rs answers 422
// with {"error": err.to_string(), "error_type": "tool_error"}. openai-python
// (_base_client.py, 3.3.1) raises UnprocessableEntityError whose message is
// f"Error code: {status} - {body}", body being the parsed JSON: a Python
// dict repr. output is the model's text; it must hold no quote or newline
// (Rust's {:?} and Python's repr would escape them).
func OpenAIStatusError(output string) string {
	return `Error code: 422 - {'error': 'Tool error: Failed to parse generated text: expected value at line 1 column 1 "` +
		output + `"', 'error_type': 'tool_error'}`
}

// pythonTraceback is traceback.format_exception's text for err raised at the
// end of a call chain: frames, then "<module>.<Type>: <message>".
func pythonTraceback(excType, message string) string {
	return "Traceback (most recent call last):\n" +
		"  File \"/app/chat.py\", line 41, in answer\n    resp = client.chat.completions.create(model=model, messages=messages, tools=tools)\n" +
		"  File \"/usr/local/lib/python3.12/site-packages/openai/_base_client.py\", line 1047, in request\n    raise self._make_status_error_from_response(err.response) from None\n" +
		excType + ": " + message + "\n"
}

// exceptionEvent is opentelemetry-sdk's record_exception (trace/__init__.py,
// 1.45): exception.type is module.qualname, message str(e), the stacktrace
// the formatted traceback, escaped a string.
func exceptionEvent(s ptrace.Span, at time.Time, excType, message string) {
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.SetTimestamp(pcommon.NewTimestampFromTime(at))
	a := e.Attributes()
	a.PutStr("exception.type", excType)
	a.PutStr("exception.message", message)
	a.PutStr("exception.stacktrace", pythonTraceback(excType, message))
	a.PutStr("exception.escaped", "False")
}

func span(ss ptrace.SpanSlice, traceID pcommon.TraceID, id, parent byte, name string, kind ptrace.SpanKind, start time.Time) ptrace.Span {
	s := ss.AppendEmpty()
	s.SetTraceID(traceID)
	s.SetSpanID(pcommon.SpanID{0xe0, 0, 0, 0, 0, 0, 0, id})
	if parent != 0 {
		s.SetParentSpanID(pcommon.SpanID{0xe0, 0, 0, 0, 0, 0, 0, parent})
	}
	s.SetName(name)
	s.SetKind(kind)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(300 * time.Millisecond)))
	return s
}

// AppendErrorSpans appends to ss, under traceID, the spans one failed chat
// call leaves when text (a prompt or model output, with no quote or newline)
// is in the error, each with status Error:
//  1. the OpenLLMetry openai chat span (chat_wrappers.py, 0.62.1:
//     error.type, record_exception(e), Status(ERROR, str(e)));
//  2. its parent, the application's HTTP server span, as the OpenTelemetry
//     API's use_span leaves it (trace/__init__.py: record_exception, then
//     description f"{type(exc).__name__}: {exc}"); no GenAI attribute;
//  3. an OpenInference LangChain chain span (_tracer.py, 0.1.70) whose
//     status is LangChain's run.error, repr(error) then the traceback
//     (langchain_core tracers/core.py _get_stacktrace) of an
//     OutputParserException that quotes the completion (output_parsers/
//     pydantic.py _parser_exception);
//  4. an openai-agents tool span from the contrib openai-agents-v2 processor
//     (span_processor.py @466ae4c0: f"{message}: {data}"), the agents SDK
//     (0.22.0, tool.py) putting str(e) of the tool's error in data by
//     default (trace_include_sensitive_data).
//
// It returns the spans in that order.
func AppendErrorSpans(ss ptrace.SpanSlice, traceID pcommon.TraceID, start time.Time, text string) []ptrace.Span {
	msg := OpenAIStatusError(text)

	server := span(ss, traceID, 1, 0, "POST /chat", ptrace.SpanKindServer, start)
	server.Attributes().PutStr("http.request.method", "POST")
	server.Attributes().PutStr("http.route", "/chat")
	server.Attributes().PutInt("http.response.status_code", 500)
	exceptionEvent(server, start.Add(290*time.Millisecond), "openai.UnprocessableEntityError", msg)
	server.Status().SetCode(ptrace.StatusCodeError)
	server.Status().SetMessage("UnprocessableEntityError: " + msg)

	chat := span(ss, traceID, 2, 1, "openai.chat", ptrace.SpanKindClient, start.Add(10*time.Millisecond))
	chat.Attributes().PutStr("gen_ai.system", "openai")
	chat.Attributes().PutStr("gen_ai.request.model", "meta-llama/Llama-3.1-8B-Instruct")
	chat.Attributes().PutStr("error.type", "UnprocessableEntityError")
	exceptionEvent(chat, start.Add(280*time.Millisecond), "openai.UnprocessableEntityError", msg)
	chat.Status().SetCode(ptrace.StatusCodeError)
	chat.Status().SetMessage(msg)

	parse := `Failed to parse Answer from completion {"answer": "` + text + `"}. Got: 1 validation error for Answer`
	chain := span(ss, traceID, 3, 1, "PydanticOutputParser", ptrace.SpanKindInternal, start.Add(20*time.Millisecond))
	chain.Attributes().PutStr("openinference.span.kind", "CHAIN")
	exceptionEvent(chain, start.Add(200*time.Millisecond), "langchain_core.exceptions.OutputParserException", parse)
	chain.Status().SetCode(ptrace.StatusCodeError)
	chain.Status().SetMessage("OutputParserException('" + parse + "')" +
		pythonTraceback("langchain_core.exceptions.OutputParserException", parse))

	tool := span(ss, traceID, 4, 1, "execute_tool get_time", ptrace.SpanKindInternal, start.Add(30*time.Millisecond))
	tool.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	tool.Attributes().PutStr("gen_ai.tool.name", "get_time")
	tool.Status().SetCode(ptrace.StatusCodeError)
	tool.Status().SetMessage("Error running tool (non-fatal): {'tool_name': 'get_time', 'error': 'unknown time zone " + text + "'}")

	return []ptrace.Span{chat, server, chain, tool}
}

// AppendErrorLog appends the record the Python logging handler
// (opentelemetry-sdk _logs/_internal/__init__.py, 1.45) makes of
// logger.exception("chat completion failed") after that call: the message as
// body, and exception.type, exception.message (str(args[0])) and
// exception.stacktrace from exc_info.
func AppendErrorLog(lrs plog.LogRecordSlice, at time.Time, text string) plog.LogRecord {
	msg := OpenAIStatusError(text)
	lr := lrs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	lr.Body().SetStr("chat completion failed")
	lr.Attributes().PutStr("exception.type", "openai.UnprocessableEntityError")
	lr.Attributes().PutStr("exception.message", msg)
	lr.Attributes().PutStr("exception.stacktrace", pythonTraceback("openai.UnprocessableEntityError", msg))
	return lr
}
