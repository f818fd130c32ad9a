// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The OpenAI Agents SDK (0.22.0 @7f7a44f8) traced by OpenInference:
// openinference-instrumentation-openai-agents 2.0.0 (Arize-ai/openinference
// @1fe497f1, python/instrumentation/openinference-instrumentation-openai-
// agents/src/openinference/instrumentation/openai_agents/_processor.py,
// OpenInferenceTracingProcessor), semantic conventions
// openinference-semantic-conventions 0.1.32 (semconv/trace/__init__.py),
// OITracer of openinference-instrumentation 0.1.57 (_tracers.py: the
// context attributes of using_session / using_user, session.id and
// user.id, go on every span it starts, before the span's own). No
// gen_ai.* attributes: OPENINFERENCE_ENABLE_GENAI_SEMCONV is off by default.
//
//   - on_trace_start: root named trace.name, openinference.span.kind AGENT,
//     kind INTERNAL (start_span's default), status OK at the end.
//   - Spans are named by span_data.name where it has one (the agent's name,
//     the tool's name), else span_data.type ("generation", "response").
//   - AgentSpanData: AGENT, and graph.node.id and agent.name at the end.
//   - GenerationSpanData / ResponseSpanData: LLM, llm.system "openai" at
//     start; llm.model_name, llm.invocation_parameters, messages, and
//     llm.token_count.prompt / .completion (chat completions usage), or
//     the Responses usage with llm.token_count.total and
//     .prompt_details.cache_read.
//   - FunctionSpanData: TOOL, tool.name, input.value, output.value; a
//     failed tool has status ERROR "{message}: {data}" (_get_span_status).
//
// The user ran each turn inside using_session("conv-7") and
// using_user("user-123").

const oiTraceA, oiTraceB = "4bf92f3577b34da6a3ce929d0e0e4ca1", "4bf92f3577b34da6a3ce929d0e0e4cb2"

func oiBatch() *batch {
	return newBatch("openinference.instrumentation.openai_agents",
		"service.name", "weather-agent", "telemetry.sdk.language", "python",
		"telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0")
}

func oiStart(b *batch, trace string, st agentStep, name, kind string) ptrace.Span {
	s := b.at(trace, st, name, ptrace.SpanKindInternal)
	put(s.Attributes(), "session.id", "conv-7", "user.id", "user-123", "openinference.span.kind", kind)
	return s
}

func oiGeneration(b *batch, trace string, st agentStep, in, out int) {
	s := oiStart(b, trace, st, "generation", "LLM")
	put(s.Attributes(),
		"llm.system", "openai",
		"llm.model_name", "Qwen/Qwen3-8B",
		"llm.invocation_parameters", `{"temperature": 0.7, "base_url": "http://vllm.internal:8000/v1/"}`,
		"llm.input_messages.0.message.role", "system",
		"llm.input_messages.0.message.content", "You are a weather assistant.",
		"llm.input_messages.1.message.role", "user",
		"llm.input_messages.1.message.content", "What's the weather in Paris and Tokyo, and what time is it?",
		"llm.output_messages.0.message.role", "assistant",
		"llm.output_messages.0.message.content", "(the model's answer)",
		"llm.token_count.prompt", in,
		"llm.token_count.completion", out)
	s.Status().SetCode(ptrace.StatusCodeOk)
}

func oiResponse(b *batch, trace string, st agentStep, in, cached, out int) {
	s := oiStart(b, trace, st, "response", "LLM")
	put(s.Attributes(),
		"llm.system", "openai",
		"output.mime_type", "application/json",
		"output.value", `{"id":"resp_x","output":[{"type":"message","content":[{"type":"output_text","text":"(the answer)"}]}]}`,
		"llm.tools.0.tool.json_schema", `{"type":"function","name":"research"}`,
		"llm.token_count.completion", out,
		"llm.token_count.prompt", in,
		"llm.token_count.total", in+out,
		"llm.token_count.prompt_details.cache_read", cached,
		"llm.output_messages.0.message.role", "assistant",
		"llm.output_messages.0.message.contents.0.message_content.type", "text",
		"llm.output_messages.0.message.contents.0.message_content.text", "(the answer)",
		"llm.input_messages.0.message.role", "system",
		"llm.input_messages.0.message.content", "You are a travel assistant.",
		"llm.model_name", "gpt-4o-2024-08-06",
		"llm.invocation_parameters", `{"id": "resp_x", "instructions": "You are a travel assistant.", "model": "gpt-4o-2024-08-06"}`,
		"input.mime_type", "application/json",
		"input.value", `[{"role":"user","content":"Is it a good week to visit Kyoto?"}]`,
		"llm.input_messages.1.message.role", "user",
		"llm.input_messages.1.message.content", "Is it a good week to visit Kyoto?")
	s.Status().SetCode(ptrace.StatusCodeOk)
}

func oiTool(b *batch, trace string, st agentStep, name, in, out string, failed string) {
	s := oiStart(b, trace, st, name, "TOOL")
	put(s.Attributes(),
		"tool.name", name,
		"input.value", in,
		"input.mime_type", "application/json",
		"output.value", out)
	if failed != "" {
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage(failed)
		return
	}
	s.Status().SetCode(ptrace.StatusCodeOk)
}

func oiAgent(b *batch, trace string, st agentStep, name string) {
	s := oiStart(b, trace, st, name, "AGENT")
	put(s.Attributes(), "graph.node.id", name, "agent.name", name)
	s.Status().SetCode(ptrace.StatusCodeOk)
}

func oiRoot(b *batch, trace string, st agentStep) {
	oiStart(b, trace, st, "Agent workflow", "AGENT").Status().SetCode(ptrace.StatusCodeOk)
}

// oiTurn1: the same turn as oaTurn1, calls to vLLM (through
// OpenAIChatCompletionsModel), without an httpx instrumentation: the
// engine's spans are not linked here.
func oiTurn1() (first, second *batch) {
	first, second = oiBatch(), oiBatch()
	t := turn1
	oiGeneration(first, oiTraceA, t.call1, 812, 64)
	oiTool(first, oiTraceA, t.clock, "get_time", `{"tz":"Asia/Tokio"}`,
		"An error occurred while running the tool. Please try again. Error: unknown time zone Asia/Tokio",
		"Error running tool (non-fatal): {'tool_name': 'get_time', 'error': 'unknown time zone Asia/Tokio'}")
	oiTool(first, oiTraceA, t.paris, "get_weather", `{"city":"Paris"}`, "18C, cloudy", "")
	oiTool(second, oiTraceA, t.tokyo, "get_weather", `{"city":"Tokyo"}`, "24C, clear", "")
	oiGeneration(second, oiTraceA, t.call2, 1210, 142)
	oiAgent(second, oiTraceA, t.agent, "Weather agent")
	oiRoot(second, oiTraceA, t.root)
	return first, second
}

func oiTurn2() *batch {
	b := oiBatch()
	t := turn2
	oiResponse(b, oiTraceB, t.call1, 350, 0, 24)
	oiResponse(b, oiTraceB, t.innerCall1, 420, 256, 38)
	oiTool(b, oiTraceB, t.search, "web_search", `{"q":"Kyoto weather this week"}`, "(search results)", "")
	oiResponse(b, oiTraceB, t.innerCall2, 910, 384, 160)
	oiAgent(b, oiTraceB, t.inner, "Research agent")
	oiTool(b, oiTraceB, t.research, "research", `{"topic":"Kyoto this week"}`, "(the research agent's answer)", "")
	oiResponse(b, oiTraceB, t.call2, 1330, 1024, 210)
	oiAgent(b, oiTraceB, t.agent, "Travel agent")
	oiRoot(b, oiTraceB, t.root)
	return b
}

var (
	_ = register("agents_openinference_turn1_a", func() ptrace.Traces { a, _ := oiTurn1(); return a.traces() })
	_ = register("agents_openinference_turn1_b", func() ptrace.Traces { _, b := oiTurn1(); return b.traces() })
	_ = register("agents_openinference_turn2", func() ptrace.Traces { return oiTurn2().traces() })
)
