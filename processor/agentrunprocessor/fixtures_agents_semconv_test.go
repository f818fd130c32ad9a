// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// An application instrumented by hand to the GenAI semantic conventions
// (open-telemetry/semantic-conventions-genai @002c8a6e, model/gen-ai/
// spans.yaml): gen_ai.invoke_agent.internal "invoke_agent {agent name}"
// (in-process agent, INTERNAL) with gen_ai.agent.name / .id and
// gen_ai.conversation.id ("conditionally required when available"),
// gen_ai.inference.client "{operation} {model}" (CLIENT) for chat and
// text_completion, gen_ai.embeddings.client "embeddings {model}",
// gen_ai.execute_tool.internal "execute_tool {tool name}" with
// gen_ai.tool.call.id, gen_ai.tool.type, the opt-in arguments and result,
// and error.type on the failed call ("conditionally required if the
// operation ended in an error"). gen_ai.provider.name is a custom value,
// "vllm", as the conventions allow for providers not in their list.
// gen_ai.usage.input_tokens includes cached tokens, which
// gen_ai.usage.cache_read.input_tokens counts again.
//
// The application adds enduser.id (a general semconv attribute) to its
// agent span. Its model calls go to a self-hosted vLLM; in turn 1 an httpx
// span carries traceparent to it.

const scTraceA, scTraceB = "d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a1", "d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5b2"

func scBatch() *spanfixture.Batch {
	return spanfixture.NewBatch("travel_app",
		"service.name", "travel-app", "telemetry.sdk.language", "python",
		"telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0")
}

func scAgent(b *spanfixture.Batch, trace string, st agentStep, name, id string) {
	s := at(b, trace, st, "invoke_agent "+name, ptrace.SpanKindInternal)
	spanfixture.Put(s.Attributes(),
		"gen_ai.operation.name", "invoke_agent",
		"gen_ai.provider.name", "vllm",
		"gen_ai.agent.name", name,
		"gen_ai.agent.id", id,
		"gen_ai.conversation.id", "conv-9f2",
		"gen_ai.request.model", "Qwen/Qwen3-8B",
		"enduser.id", "user-123",
		"gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"(the user's message)"}]}]`,
		"gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"(the answer)"}]}]`)
}

func scCall(b *spanfixture.Batch, trace string, st agentStep, op, model, respID string, in, cached, out int) {
	s := at(b, trace, st, op+" "+model, ptrace.SpanKindClient)
	spanfixture.Put(s.Attributes(),
		"gen_ai.operation.name", op,
		"gen_ai.provider.name", "vllm",
		"gen_ai.request.model", model,
		"server.address", "vllm.internal",
		"server.port", 8000,
		"gen_ai.conversation.id", "conv-9f2",
		"gen_ai.response.id", respID,
		"gen_ai.response.model", model,
		"gen_ai.usage.input_tokens", in,
		"gen_ai.usage.cache_read.input_tokens", cached,
		"gen_ai.usage.output_tokens", out)
	fr := s.Attributes().PutEmptySlice("gen_ai.response.finish_reasons")
	fr.AppendEmpty().SetStr("stop")
	spanfixture.Put(s.Attributes(),
		"gen_ai.system_instructions", `[{"type":"text","content":"You are a travel assistant."}]`,
		"gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"(the prompt)"}]}]`,
		"gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"(the reply)"}],"finish_reason":"stop"}]`)
}

func scEmbeddings(b *spanfixture.Batch, trace string, st agentStep, in int) {
	s := at(b, trace, st, "embeddings BAAI/bge-m3", ptrace.SpanKindClient)
	spanfixture.Put(s.Attributes(),
		"gen_ai.operation.name", "embeddings",
		"gen_ai.provider.name", "vllm",
		"gen_ai.request.model", "BAAI/bge-m3",
		"server.address", "vllm-embed.internal",
		"server.port", 8000,
		"gen_ai.usage.input_tokens", in,
		"gen_ai.embeddings.dimension.count", 1024)
}

func scTool(b *spanfixture.Batch, trace string, st agentStep, name, callID, args, result, errType string) {
	s := at(b, trace, st, "execute_tool "+name, ptrace.SpanKindInternal)
	spanfixture.Put(s.Attributes(),
		"gen_ai.operation.name", "execute_tool",
		"gen_ai.tool.name", name,
		"gen_ai.tool.call.id", callID,
		"gen_ai.tool.type", "function",
		"gen_ai.tool.call.arguments", args)
	if errType != "" {
		spanfixture.Put(s.Attributes(), "error.type", errType)
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage("unknown time zone")
		return
	}
	spanfixture.Put(s.Attributes(), "gen_ai.tool.call.result", result)
}

func scTurn1() (first, second, engine *spanfixture.Batch) {
	first, second, engine = scBatch(), scBatch(), spanfixture.VLLMExport()
	t := turn1
	vllmUnder(first, engine, scTraceA, t.call1, "a100000000000031", "c100000000000031", "chatcmpl-sc1", engineCall(0))
	scCall(first, scTraceA, t.call1, "chat", "Qwen/Qwen3-8B", "chatcmpl-sc1", 812, 512, 64)
	scTool(first, scTraceA, t.clock, "get_time", "call_3", `{"tz":"Asia/Tokio"}`, "", "ValueError")
	scTool(first, scTraceA, t.paris, "get_weather", "call_1", `{"city":"Paris"}`, "18C, cloudy", "")
	scTool(second, scTraceA, t.tokyo, "get_weather", "call_2", `{"city":"Tokyo"}`, "24C, clear", "")
	vllmUnder(second, engine, scTraceA, t.call2, "a100000000000032", "c100000000000032", "chatcmpl-sc2", engineCall(1))
	scCall(second, scTraceA, t.call2, "chat", "Qwen/Qwen3-8B", "chatcmpl-sc2", 1210, 768, 142)
	scAgent(second, scTraceA, t.agent, "Weather agent", "asst_weather")
	s := at(second, scTraceA, t.root, "POST /chat", ptrace.SpanKindServer)
	spanfixture.Put(s.Attributes(), "http.request.method", "POST", "http.route", "/chat", "http.response.status_code", 200)
	return first, second, engine
}

// scTurn2: the research agent as a tool; its search embeds the query, and
// its second call is a plain text completion.
func scTurn2() *spanfixture.Batch {
	b := scBatch()
	t := turn2
	scCall(b, scTraceB, t.call1, "chat", "Qwen/Qwen3-8B", "chatcmpl-sc3", 350, 0, 24)
	scCall(b, scTraceB, t.innerCall1, "chat", "Qwen/Qwen3-8B", "chatcmpl-sc4", 420, 256, 38)
	scEmbeddings(b, scTraceB, agentStep{"b200000000000041", t.search.id, 23.420, 23.520}, 12)
	scTool(b, scTraceB, t.search, "web_search", "call_5", `{"q":"Kyoto weather this week"}`, "(search results)", "")
	scCall(b, scTraceB, t.innerCall2, "text_completion", "Qwen/Qwen3-8B", "cmpl-sc5", 910, 384, 160)
	scAgent(b, scTraceB, t.inner, "Research agent", "asst_research")
	scTool(b, scTraceB, t.research, "research", "call_4", `{"topic":"Kyoto this week"}`, "(the research agent's answer)", "")
	scCall(b, scTraceB, t.call2, "chat", "Qwen/Qwen3-8B", "chatcmpl-sc6", 1330, 1024, 210)
	scAgent(b, scTraceB, t.agent, "Travel agent", "asst_travel")
	s := at(b, scTraceB, t.root, "POST /chat", ptrace.SpanKindServer)
	spanfixture.Put(s.Attributes(), "http.request.method", "POST", "http.route", "/chat", "http.response.status_code", 200)
	return b
}

var (
	_ = generators.Register("agents_semconv_turn1_a", func() ptrace.Traces { a, _, _ := scTurn1(); return a.Traces() })
	_ = generators.Register("agents_semconv_turn1_b", func() ptrace.Traces { _, b, _ := scTurn1(); return b.Traces() })
	_ = generators.Register("agents_semconv_turn1_vllm", func() ptrace.Traces { _, _, e := scTurn1(); return e.Traces() })
	_ = generators.Register("agents_semconv_turn2", func() ptrace.Traces { return scTurn2().Traces() })
)
