// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The OpenAI Agents SDK (openai/openai-agents-python 0.22.0 @7f7a44f8)
// bridged to OpenTelemetry by the contrib instrumentation
// opentelemetry-instrumentation-openai-agents-v2 0.2.0.dev
// (open-telemetry/opentelemetry-python-contrib @466ae4c0,
// instrumentation-genai/opentelemetry-instrumentation-openai-agents-v2/src/
// opentelemetry/instrumentation/openai_agents/span_processor.py,
// GenAISemanticProcessor), with its defaults: system "openai", content
// captured on spans (SPAN_AND_EVENT), no agent name override.
//
//   - on_trace_start: a SERVER root named trace.name ("Agent workflow",
//     RunConfig.workflow_name's default, run_config.py), attributes
//     gen_ai.provider.name, gen_ai.system, gen_ai.operation.name=invoke_agent;
//     status OK at on_trace_end.
//   - AgentSpanData: CLIENT "invoke_agent {name}"; at the end the agent's
//     gen_ai.operation.name, gen_ai.agent.name, gen_ai.request.model (from
//     its first child call), the aggregated content, gen_ai.output.type.
//     AgentSpanData has no conversation_id in 0.22.0, so no
//     gen_ai.conversation.id: turns cannot be numbered from this
//     instrumentation.
//   - GenerationSpanData (OpenAIChatCompletionsModel, here pointed at vLLM):
//     CLIENT, "text_completion Qwen/Qwen3-8B" at start (its input is empty
//     then), renamed "chat Qwen/Qwen3-8B" at the end; usage input/output
//     tokens; base_url from model_config_for_trace gives server.address/port.
//   - ResponseSpanData (the default OpenAIResponsesModel): CLIENT "chat",
//     renamed "chat {response.model}"; gen_ai.response.id,
//     gen_ai.response.model, gen_ai.request.model = response.model, usage,
//     gen_ai.tool.definitions.
//   - FunctionSpanData: INTERNAL "execute_tool {name}", gen_ai.tool.name,
//     gen_ai.tool.type=function, arguments and result. A failed tool:
//     SpanError(message="Error running tool (non-fatal)", data={tool_name,
//     error}) (tool.py _build_handled_function_tool_error_handler), so status
//     ERROR "{message}: {data}" and no error.type (SpanError has no type).
//   - Agent.as_tool (agent.py): a function span whose tool runs a nested
//     Runner.run in the same trace, so the nested agent span is its child.
//
// Parallel tool calls: the SDK runs function tools concurrently, so the two
// execute_tool spans overlap. Spans reach the exporter in the order they
// end (BatchSpanProcessor); turn 1 is split across two exports.

const oaTraceA, oaTraceB = "0af7651916cd43dd8448eb211c8031a1", "0af7651916cd43dd8448eb211c8031b2"

func oaBatch() *batch {
	b := newBatch("opentelemetry.instrumentation.openai_agents",
		"service.name", "weather-agent", "telemetry.sdk.language", "python",
		"telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0")
	b.td.ResourceSpans().At(0).ScopeSpans().At(0).SetSchemaUrl("https://opentelemetry.io/schemas/1.28.0")
	return b
}

func oaBase(s ptrace.Span, op string) {
	put(s.Attributes(), "gen_ai.provider.name", "openai", "gen_ai.system", "openai", "gen_ai.operation.name", op)
}

func oaGeneration(b *batch, trace string, st agentStep, in, out int, answer string) ptrace.Span {
	s := b.at(trace, st, "chat Qwen/Qwen3-8B", ptrace.SpanKindClient)
	oaBase(s, "chat")
	put(s.Attributes(),
		"gen_ai.request.model", "Qwen/Qwen3-8B",
		"gen_ai.usage.input_tokens", in,
		"gen_ai.usage.output_tokens", out,
		"gen_ai.request.temperature", 0.7,
		"server.address", "vllm.internal",
		"server.port", 8000,
		"gen_ai.input.messages", jsonStr([]any{map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": "What's the weather in Paris and Tokyo, and what time is it?"}}}}),
		"gen_ai.system_instructions", jsonStr([]any{map[string]any{"type": "text", "content": "You are a weather assistant."}}),
		"gen_ai.output.messages", jsonStr([]any{map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "text", "content": answer}}}}),
		"gen_ai.output.type", "text")
	s.Status().SetCode(ptrace.StatusCodeOk)
	return s
}

func oaResponse(b *batch, trace string, st agentStep, respID string, in, out int) ptrace.Span {
	s := b.at(trace, st, "chat gpt-4o-2024-08-06", ptrace.SpanKindClient)
	oaBase(s, "chat")
	put(s.Attributes(),
		"gen_ai.response.id", respID,
		"gen_ai.response.model", "gpt-4o-2024-08-06",
		"gen_ai.request.model", "gpt-4o-2024-08-06",
		"gen_ai.usage.input_tokens", in,
		"gen_ai.usage.output_tokens", out,
		"gen_ai.tool.definitions", jsonStr([]any{map[string]any{"type": "function", "name": "research", "description": "Research a topic"}}),
		"gen_ai.input.messages", jsonStr([]any{map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": "Is it a good week to visit Kyoto?"}}}}),
		"gen_ai.system_instructions", jsonStr([]any{map[string]any{"type": "text", "content": "You are a travel assistant."}}),
		"gen_ai.output.messages", jsonStr([]any{map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "text", "content": "Let me research that."}}}}),
		"gen_ai.output.type", "text")
	s.Status().SetCode(ptrace.StatusCodeOk)
	return s
}

func oaTool(b *batch, trace string, st agentStep, name, args, result string) ptrace.Span {
	s := b.at(trace, st, "execute_tool "+name, ptrace.SpanKindInternal)
	oaBase(s, "execute_tool")
	put(s.Attributes(),
		"gen_ai.tool.name", name,
		"gen_ai.tool.type", "function",
		"gen_ai.tool.call.arguments", args,
		"gen_ai.tool.call.result", result,
		"gen_ai.output.type", "json")
	s.Status().SetCode(ptrace.StatusCodeOk)
	return s
}

func oaAgent(b *batch, trace string, st agentStep, name, model string) ptrace.Span {
	s := b.at(trace, st, "invoke_agent "+name, ptrace.SpanKindClient)
	oaBase(s, "invoke_agent")
	put(s.Attributes(),
		"gen_ai.agent.name", name,
		"gen_ai.request.model", model,
		"gen_ai.input.messages", jsonStr([]any{map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": "(the run's input)"}}}}),
		"gen_ai.output.messages", jsonStr([]any{map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "text", "content": "(the run's answer)"}}}}),
		"gen_ai.system_instructions", jsonStr([]any{map[string]any{"type": "text", "content": "(the agent's instructions)"}}),
		"gen_ai.output.type", "text")
	s.Status().SetCode(ptrace.StatusCodeOk)
	return s
}

func oaRoot(b *batch, trace string, st agentStep) {
	s := b.at(trace, st, "Agent workflow", ptrace.SpanKindServer)
	oaBase(s, "invoke_agent")
	s.Status().SetCode(ptrace.StatusCodeOk)
}

// oaTurn1 returns the agent process's two exports of turn 1 and the vLLM
// server's export of the two model calls' requests.
func oaTurn1() (first, second, engine *batch) {
	first, second, engine = oaBatch(), oaBatch(), vllmExport()
	t := turn1
	// Export 1: what ended by 5 s.
	vllmUnder(first, engine, oaTraceA, t.call1, "a100000000000011", "c100000000000011", "chatcmpl-a1c1", engineCall(0))
	oaGeneration(first, oaTraceA, t.call1, 812, 64, "(calls get_weather twice)")
	s := first.at(oaTraceA, t.clock, "execute_tool get_time", ptrace.SpanKindInternal)
	oaBase(s, "execute_tool")
	put(s.Attributes(),
		"gen_ai.tool.name", "get_time",
		"gen_ai.tool.type", "function",
		"gen_ai.tool.call.arguments", `{"tz":"Asia/Tokio"}`,
		"gen_ai.tool.call.result", "An error occurred while running the tool. Please try again. Error: unknown time zone Asia/Tokio",
		"gen_ai.output.type", "json")
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("Error running tool (non-fatal): {'tool_name': 'get_time', 'error': 'unknown time zone Asia/Tokio'}")
	oaTool(first, oaTraceA, t.paris, "get_weather", `{"city":"Paris"}`, "18C, cloudy")
	// Export 2: the rest: the slow tool, the answer, the agent, the root.
	oaTool(second, oaTraceA, t.tokyo, "get_weather", `{"city":"Tokyo"}`, "24C, clear")
	vllmUnder(second, engine, oaTraceA, t.call2, "a100000000000012", "c100000000000012", "chatcmpl-a1c2", engineCall(1))
	oaGeneration(second, oaTraceA, t.call2, 1210, 142, "Paris 18C and cloudy, Tokyo 24C and clear.")
	oaAgent(second, oaTraceA, t.agent, "Weather agent", "Qwen/Qwen3-8B")
	oaRoot(second, oaTraceA, t.root)
	return first, second, engine
}

// oaTurn2: the Travel agent asks the Research agent, run as its tool; both
// call gpt-4o through the Responses API.
func oaTurn2() *batch {
	b := oaBatch()
	t := turn2
	oaResponse(b, oaTraceB, t.call1, "resp_b201", 350, 24)
	oaResponse(b, oaTraceB, t.innerCall1, "resp_b202", 420, 38)
	oaTool(b, oaTraceB, t.search, "web_search", `{"q":"Kyoto weather this week"}`, "(search results)")
	oaResponse(b, oaTraceB, t.innerCall2, "resp_b203", 910, 160)
	oaAgent(b, oaTraceB, t.inner, "Research agent", "gpt-4o-2024-08-06")
	oaTool(b, oaTraceB, t.research, "research", `{"topic":"Kyoto this week"}`, "(the research agent's answer)")
	oaResponse(b, oaTraceB, t.call2, "resp_b204", 1330, 210)
	oaAgent(b, oaTraceB, t.agent, "Travel agent", "gpt-4o-2024-08-06")
	oaRoot(b, oaTraceB, t.root)
	return b
}

var (
	_ = register("agents_openai_turn1_a", func() ptrace.Traces { a, _, _ := oaTurn1(); return a.traces() })
	_ = register("agents_openai_turn1_b", func() ptrace.Traces { _, b, _ := oaTurn1(); return b.traces() })
	_ = register("agents_openai_turn1_vllm", func() ptrace.Traces { _, _, e := oaTurn1(); return e.traces() })
	_ = register("agents_openai_turn2", func() ptrace.Traces { return oaTurn2().traces() })
)
