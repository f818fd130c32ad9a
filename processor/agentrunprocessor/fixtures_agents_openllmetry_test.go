// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// OpenLLMetry's LangChain span writers, for the plain LangChain agent
// (fixtures_agents_langchain_test.go): opentelemetry-instrumentation-langchain
// 0.62.1 (traceloop/openllmetry @93429cfb, packages/opentelemetry-
// instrumentation-langchain/opentelemetry/instrumentation/langchain/:
// callback_handler.py, span_utils.py), semantic conventions
// opentelemetry-semantic-conventions-ai 0.5.2. Prompts are sent (the
// default, TRACELOOP_TRACE_CONTENT unset); events are not emitted. The
// LangGraph agent these served runs on its real recording now
// (agents_recorded_test.go, langgraph-openllmetry).

// olBatch is an export of a Python process OpenLLMetry's LangChain
// instrumentation traces.
func olBatch(service string) *spanfixture.Batch {
	b := spanfixture.NewBatch("opentelemetry.instrumentation.langchain",
		"service.name", service, "telemetry.sdk.language", "python",
		"telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0")
	b.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetVersion("0.62.1")
	return b
}

// olChain is OpenLLMetry's chain span (callback_handler.py on_chain_start,
// _create_task_span, _create_span, on_chain_end): the workflow when the run
// has no parent run it knows, else a task. props are the run's metadata as
// _create_span writes it (traceloop.association.properties.*); provider is
// langgraph inside a graph, else langchain.
func olChain(b *spanfixture.Batch, trace string, st agentStep, name, workflow, path, provider string, props []any, runID, parentRun, input, output string) {
	workflowKind := parentRun == ""
	spanName := "execute_task " + name
	if workflowKind {
		spanName = name + ".workflow"
	}
	s := at(b, trace, st, spanName, ptrace.SpanKindInternal)
	spanfixture.Put(s.Attributes(), "traceloop.workflow.name", workflow, "traceloop.entity.path", path)
	spanfixture.Put(s.Attributes(), props...)
	if workflowKind {
		spanfixture.Put(s.Attributes(),
			"traceloop.span.kind", "workflow",
			"traceloop.entity.name", name,
			"gen_ai.provider.name", provider,
			"gen_ai.operation.name", "invoke_agent",
			"gen_ai.agent.name", name,
			"gen_ai.agent.id", runID)
	} else {
		spanfixture.Put(s.Attributes(),
			"traceloop.span.kind", "task",
			"traceloop.entity.name", name,
			"gen_ai.provider.name", provider,
			"gen_ai.operation.name", "execute_task",
			"gen_ai.task.name", name,
			"gen_ai.task.id", runID,
			"gen_ai.task.parent.id", parentRun)
	}
	spanfixture.Put(s.Attributes(),
		"traceloop.entity.input", input,
		"gen_ai.task.input", input,
		"gen_ai.task.status", "success",
		"traceloop.entity.output", output,
		"gen_ai.task.output", output)
}

// olCall is what one chat span says.
type olCall struct {
	workflow, path string
	props          []any // the run's metadata, traceloop.association.properties.*
	// respModel is the request's model until on_llm_end finds another in
	// llm_output (absent when streamed); respID is set from llm_output only.
	respModel, respID, finish string
	in, out, cached           int
	cacheKnown                bool // usage_metadata had input_token_details.cache_read
}

// olLLM is OpenLLMetry's chat span (on_chat_model_start, _create_llm_span,
// span_utils.py set_request_params / set_chat_request, on_llm_end,
// set_chat_response_usage, set_chat_response).
func olLLM(b *spanfixture.Batch, trace string, st agentStep, c olCall) {
	s := at(b, trace, st, "ChatOpenAI.chat", ptrace.SpanKindClient)
	spanfixture.Put(s.Attributes(), "traceloop.workflow.name", c.workflow, "traceloop.entity.path", c.path)
	spanfixture.Put(s.Attributes(), c.props...)
	spanfixture.Put(s.Attributes(),
		"gen_ai.provider.name", "openai",
		"gen_ai.operation.name", "chat",
		"gen_ai.request.model", "gpt-4o",
		"gen_ai.response.model", c.respModel,
		"gen_ai.request.temperature", 0.0,
		"gen_ai.tool.definitions", `[{"name": "get_weather", "description": "Weather of a city"}]`,
		"gen_ai.system_instructions", `[{"type": "text", "content": "You are a travel assistant."}]`,
		"gen_ai.input.messages", `[{"role": "user", "parts": [{"type": "text", "content": "What's the weather in Paris and Tokyo?"}]}]`)
	if c.respID != "" {
		spanfixture.Put(s.Attributes(), "gen_ai.response.id", c.respID)
	}
	spanfixture.Put(s.Attributes(),
		"gen_ai.usage.input_tokens", c.in,
		"gen_ai.usage.output_tokens", c.out,
		"gen_ai.usage.total_tokens", c.in+c.out)
	if c.cacheKnown {
		spanfixture.Put(s.Attributes(), "gen_ai.usage.cache_read.input_tokens", c.cached)
	}
	spanfixture.Put(s.Attributes(), "gen_ai.output.messages", `[{"role": "assistant", "parts": [{"type": "text", "content": "(the reply)"}], "finish_reason": "`+c.finish+`"}]`)
	fr := s.Attributes().PutEmptySlice("gen_ai.response.finish_reasons")
	fr.AppendEmpty().SetStr(c.finish)
}

// olTool is OpenLLMetry's tool span (on_tool_start, on_tool_end, and
// on_tool_error through _handle_error).
func olTool(b *spanfixture.Batch, trace string, st agentStep, name, workflow, path, provider string, props []any, args, result, err string) {
	s := at(b, trace, st, "execute_tool "+name, ptrace.SpanKindInternal)
	in := `{"input_str": "` + args + `", "tags": [], "metadata": {}, "inputs": null, "kwargs": {}}`
	spanfixture.Put(s.Attributes(), "traceloop.workflow.name", workflow, "traceloop.entity.path", path)
	spanfixture.Put(s.Attributes(), props...)
	spanfixture.Put(s.Attributes(),
		"traceloop.span.kind", "tool",
		"traceloop.entity.name", name,
		"gen_ai.provider.name", provider,
		"gen_ai.operation.name", "execute_tool",
		"gen_ai.tool.name", name,
		"gen_ai.tool.type", "function",
		"gen_ai.tool.description", "(the tool's docstring)",
		"traceloop.entity.input", in,
		"gen_ai.tool.call.arguments", in)
	if err != "" {
		spanfixture.Put(s.Attributes(), "gen_ai.task.status", "failure", "error.type", "ValueError")
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage(err)
		spanfixture.Event(s, "exception", spanfixture.NS(spanfixture.T0+st.end), "exception.type", "ValueError", "exception.message", err,
			"exception.stacktrace", "Traceback (most recent call last):\n  ...\nValueError: "+err, "exception.escaped", "False")
		return
	}
	out := `{"output": "` + result + `", "kwargs": {}}`
	spanfixture.Put(s.Attributes(),
		"gen_ai.task.status", "success",
		"traceloop.entity.output", out,
		"gen_ai.tool.call.result", out)
}
