// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A LangGraph ReAct agent (create_react_agent: nodes "agent" and "tools")
// traced by OpenLLMetry: opentelemetry-instrumentation-langchain 0.62.1
// (traceloop/openllmetry @93429cfb, packages/opentelemetry-instrumentation-
// langchain/opentelemetry/instrumentation/langchain/: callback_handler.py,
// patch.py, span_utils.py), semantic conventions
// opentelemetry-semantic-conventions-ai 0.5.2. Prompts are sent (the
// default, TRACELOOP_TRACE_CONTENT unset); events are not emitted.
//
//   - patch.py create_graph_invocation_wrapper: around Pregel.stream, an
//     INTERNAL span "invoke_agent {graph name}" with gen_ai.provider.name
//     langgraph, gen_ai.operation.name invoke_agent, gen_ai.agent.name,
//     gen_ai.conversation.id from config["configurable"]["thread_id"],
//     gen_ai.workflow.nodes / .edges. Status stays unset unless it raises.
//   - on_chain_start without a known parent run: "{name}.workflow", the
//     graph span's first child (LANGGRAPH_FIRST_CHILD_PENDING_KEY), with
//     traceloop.span.kind workflow and, like an agent, invoke_agent and
//     gen_ai.agent.name; with a parent run: "execute_task {name}",
//     traceloop.span.kind task, gen_ai.operation.name execute_task.
//     Inputs and outputs go to traceloop.entity.input / .output and
//     gen_ai.task.input / .output; metadata to
//     traceloop.association.properties.*.
//   - on_chat_model_start: CLIENT "ChatOpenAI.chat", gen_ai.provider.name
//     from vendor_detection.py ("openai"), gen_ai.operation.name chat,
//     set_request_params (gen_ai.request.model, and gen_ai.response.model
//     set to the same until the response), messages; on_llm_end the
//     response model, id, usage (input, output, total; cache_read from
//     usage_metadata), output messages, finish reasons.
//   - on_tool_start: "execute_tool {name}", gen_ai.tool.name, type function,
//     gen_ai.tool.call.arguments; on_tool_error (_handle_error):
//     gen_ai.task.status failure, error.type = the exception's class, status
//     ERROR, an exception event.
//   - A sub-graph run inside a tool: its graph span "invoke_agent
//     research_agent" is the tool span's child, but its callback chains have
//     the tool's run as parent run, so they are parented to the tool span
//     (_create_span), not to the sub-graph's span. The nested invoke_agent
//     span has no children of its own.
//
// ToolNode runs the three tool calls of one model message in parallel.

const tlTraceA, tlTraceB = "7a3c1d2e4f5061728394a5b6c7d8e9a1", "7a3c1d2e4f5061728394a5b6c7d8e9b2"

func tlBatch() *batch { return olBatch("travel-graph") }

// olBatch is an export of a Python process OpenLLMetry's LangChain
// instrumentation traces.
func olBatch(service string) *batch {
	b := newBatch("opentelemetry.instrumentation.langchain",
		"service.name", service, "telemetry.sdk.language", "python",
		"telemetry.sdk.name", "opentelemetry", "telemetry.sdk.version", "1.38.0")
	b.td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetVersion("0.62.1")
	return b
}

// under re-parents a step of the shared layout: LangGraph puts calls and
// tools under its node spans.
func under(s agentStep, parent string) agentStep {
	s.parent = parent
	return s
}

const tlThread = "thread-42"

func tlGraph(b *batch, trace string, st agentStep, name string) {
	s := b.at(trace, st, "invoke_agent "+name, ptrace.SpanKindInternal)
	attrs := s.Attributes()
	put(attrs,
		"gen_ai.provider.name", "langgraph",
		"gen_ai.operation.name", "invoke_agent",
		"gen_ai.agent.name", name,
		"gen_ai.conversation.id", tlThread)
	nodes := attrs.PutEmptySlice("gen_ai.workflow.nodes")
	for _, n := range []string{"__start__", "agent", "tools"} {
		nodes.AppendEmpty().SetStr(n)
	}
	edges := attrs.PutEmptySlice("gen_ai.workflow.edges")
	for _, e := range []string{"__start__->agent", "agent->tools", "agent->__end__", "tools->agent"} {
		edges.AppendEmpty().SetStr(e)
	}
}

// tlChain is on_chain_start + on_chain_end for a chain run: the workflow
// (no parent run) or a task.
func tlChain(b *batch, trace string, st agentStep, name, workflow, path, node, runID, parentRun string) {
	props := []any{"traceloop.association.properties.thread_id", tlThread}
	if node != "" {
		props = append(props, "traceloop.association.properties.langgraph_node", node)
	}
	olChain(b, trace, st, name, workflow, path, "langgraph", props, runID, parentRun,
		`{"inputs": {"messages": ["(the conversation)"]}, "tags": [], "metadata": {}, "kwargs": {}}`,
		`{"outputs": {"messages": ["(the reply)"]}, "kwargs": {}}`)
}

// olChain is OpenLLMetry's chain span (callback_handler.py on_chain_start,
// _create_task_span, _create_span, on_chain_end): the workflow when the run
// has no parent run it knows, else a task. props are the run's metadata as
// _create_span writes it (traceloop.association.properties.*); provider is
// langgraph inside a graph, else langchain.
func olChain(b *batch, trace string, st agentStep, name, workflow, path, provider string, props []any, runID, parentRun, input, output string) {
	workflowKind := parentRun == ""
	spanName := "execute_task " + name
	if workflowKind {
		spanName = name + ".workflow"
	}
	s := b.at(trace, st, spanName, ptrace.SpanKindInternal)
	put(s.Attributes(), "traceloop.workflow.name", workflow, "traceloop.entity.path", path)
	put(s.Attributes(), props...)
	if workflowKind {
		put(s.Attributes(),
			"traceloop.span.kind", "workflow",
			"traceloop.entity.name", name,
			"gen_ai.provider.name", provider,
			"gen_ai.operation.name", "invoke_agent",
			"gen_ai.agent.name", name,
			"gen_ai.agent.id", runID)
	} else {
		put(s.Attributes(),
			"traceloop.span.kind", "task",
			"traceloop.entity.name", name,
			"gen_ai.provider.name", provider,
			"gen_ai.operation.name", "execute_task",
			"gen_ai.task.name", name,
			"gen_ai.task.id", runID,
			"gen_ai.task.parent.id", parentRun)
	}
	put(s.Attributes(),
		"traceloop.entity.input", input,
		"gen_ai.task.input", input,
		"gen_ai.task.status", "success",
		"traceloop.entity.output", output,
		"gen_ai.task.output", output)
}

func tlLLM(b *batch, trace string, st agentStep, path, respID string, in, out, cached int) {
	olLLM(b, trace, st, olCall{
		workflow: "LangGraph", path: path,
		props: []any{
			"traceloop.association.properties.thread_id", tlThread,
			"traceloop.association.properties.langgraph_node", "agent",
		},
		respModel: "gpt-4o-2024-08-06", respID: respID, finish: "stop",
		in: in, out: out, cached: cached, cacheKnown: cached > 0,
	})
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
func olLLM(b *batch, trace string, st agentStep, c olCall) {
	s := b.at(trace, st, "ChatOpenAI.chat", ptrace.SpanKindClient)
	put(s.Attributes(), "traceloop.workflow.name", c.workflow, "traceloop.entity.path", c.path)
	put(s.Attributes(), c.props...)
	put(s.Attributes(),
		"gen_ai.provider.name", "openai",
		"gen_ai.operation.name", "chat",
		"gen_ai.request.model", "gpt-4o",
		"gen_ai.response.model", c.respModel,
		"gen_ai.request.temperature", 0.0,
		"gen_ai.tool.definitions", `[{"name": "get_weather", "description": "Weather of a city"}]`,
		"gen_ai.system_instructions", `[{"type": "text", "content": "You are a travel assistant."}]`,
		"gen_ai.input.messages", `[{"role": "user", "parts": [{"type": "text", "content": "What's the weather in Paris and Tokyo?"}]}]`)
	if c.respID != "" {
		put(s.Attributes(), "gen_ai.response.id", c.respID)
	}
	put(s.Attributes(),
		"gen_ai.usage.input_tokens", c.in,
		"gen_ai.usage.output_tokens", c.out,
		"gen_ai.usage.total_tokens", c.in+c.out)
	if c.cacheKnown {
		put(s.Attributes(), "gen_ai.usage.cache_read.input_tokens", c.cached)
	}
	put(s.Attributes(), "gen_ai.output.messages", `[{"role": "assistant", "parts": [{"type": "text", "content": "(the reply)"}], "finish_reason": "`+c.finish+`"}]`)
	fr := s.Attributes().PutEmptySlice("gen_ai.response.finish_reasons")
	fr.AppendEmpty().SetStr(c.finish)
}

func tlTool(b *batch, trace string, st agentStep, name, path, args, result string, err string) {
	olTool(b, trace, st, name, "LangGraph", path, "langgraph", []any{
		"traceloop.association.properties.thread_id", tlThread,
		"traceloop.association.properties.langgraph_node", "tools",
	}, args, result, err)
}

// olTool is OpenLLMetry's tool span (on_tool_start, on_tool_end, and
// on_tool_error through _handle_error).
func olTool(b *batch, trace string, st agentStep, name, workflow, path, provider string, props []any, args, result, err string) {
	s := b.at(trace, st, "execute_tool "+name, ptrace.SpanKindInternal)
	in := `{"input_str": "` + args + `", "tags": [], "metadata": {}, "inputs": null, "kwargs": {}}`
	put(s.Attributes(), "traceloop.workflow.name", workflow, "traceloop.entity.path", path)
	put(s.Attributes(), props...)
	put(s.Attributes(),
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
		put(s.Attributes(), "gen_ai.task.status", "failure", "error.type", "ValueError")
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage(err)
		event(s, "exception", ns(t0+st.end), "exception.type", "ValueError", "exception.message", err,
			"exception.stacktrace", "Traceback (most recent call last):\n  ...\nValueError: "+err, "exception.escaped", "False")
		return
	}
	out := `{"output": "` + result + `", "kwargs": {}}`
	put(s.Attributes(),
		"gen_ai.task.status", "success",
		"traceloop.entity.output", out,
		"gen_ai.tool.call.result", out)
}

// LangGraph's node spans, around the shared layout's calls and tools.
var tlNodes1 = struct{ agent1, tools, agent2 agentStep }{
	agent1: agentStep{"a100000000000021", "a100000000000002", 0.050, 2.150},
	tools:  agentStep{"a100000000000022", "a100000000000002", 2.150, 5.300},
	agent2: agentStep{"a100000000000023", "a100000000000002", 5.450, 8.750},
}

var tlNodes2 = struct{ agent1, tools, agent2, sub, subAgent1, subTools, subAgent2 agentStep }{
	agent1:    agentStep{"b200000000000021", "b200000000000002", 20.050, 21.150},
	tools:     agentStep{"b200000000000022", "b200000000000002", 21.150, 25.250},
	agent2:    agentStep{"b200000000000023", "b200000000000002", 25.280, 26.850},
	sub:       agentStep{"b200000000000031", "b200000000000004", 21.260, 25.140},
	subAgent1: agentStep{"b200000000000032", "b200000000000031", 21.280, 23.320},
	subTools:  agentStep{"b200000000000033", "b200000000000031", 23.350, 24.050},
	subAgent2: agentStep{"b200000000000034", "b200000000000031", 24.080, 25.120},
}

const tlRun = "1f0e2d3c-4b5a-6978-8796-a5b4c3d2e1f"

func tlTurn1() (first, second *batch) {
	first, second = tlBatch(), tlBatch()
	t, n := turn1, tlNodes1
	tlLLM(first, tlTraceA, under(t.call1, n.agent1.id), "agent", "chatcmpl-tl1", 812, 64, 0)
	tlChain(first, tlTraceA, n.agent1, "agent", "LangGraph", "", "agent", tlRun+"1", tlRun+"0")
	tlTool(first, tlTraceA, under(t.clock, n.tools.id), "get_time", "tools", "Asia/Tokio", "", "unknown time zone Asia/Tokio")
	tlTool(first, tlTraceA, under(t.paris, n.tools.id), "get_weather", "tools", "Paris", "18C, cloudy", "")
	tlTool(second, tlTraceA, under(t.tokyo, n.tools.id), "get_weather", "tools", "Tokyo", "24C, clear", "")
	tlChain(second, tlTraceA, n.tools, "tools", "LangGraph", "", "tools", tlRun+"2", tlRun+"0")
	tlLLM(second, tlTraceA, under(t.call2, n.agent2.id), "agent", "chatcmpl-tl2", 1210, 142, 768)
	tlChain(second, tlTraceA, n.agent2, "agent", "LangGraph", "", "agent", tlRun+"3", tlRun+"0")
	tlChain(second, tlTraceA, t.agent, "LangGraph", "LangGraph", "", "", tlRun+"0", "")
	tlGraph(second, tlTraceA, t.root, "LangGraph")
	return first, second
}

func tlTurn2() *batch {
	b := tlBatch()
	t, n := turn2, tlNodes2
	tlLLM(b, tlTraceB, under(t.call1, n.agent1.id), "agent", "chatcmpl-tl3", 350, 24, 0)
	tlChain(b, tlTraceB, n.agent1, "agent", "LangGraph", "", "agent", tlRun+"5", tlRun+"4")
	tlLLM(b, tlTraceB, under(t.innerCall1, n.subAgent1.id), "tools.research.research_agent.agent", "chatcmpl-tl4", 420, 38, 256)
	tlChain(b, tlTraceB, n.subAgent1, "agent", "LangGraph", "tools.research.research_agent", "agent", tlRun+"8", tlRun+"7")
	tlTool(b, tlTraceB, under(t.search, n.subTools.id), "web_search", "tools.research.research_agent.tools", "Kyoto weather this week", "(search results)", "")
	tlChain(b, tlTraceB, n.subTools, "tools", "LangGraph", "tools.research.research_agent", "tools", tlRun+"9", tlRun+"7")
	tlLLM(b, tlTraceB, under(t.innerCall2, n.subAgent2.id), "tools.research.research_agent.agent", "chatcmpl-tl5", 910, 160, 384)
	tlChain(b, tlTraceB, n.subAgent2, "agent", "LangGraph", "tools.research.research_agent", "agent", tlRun+"a", tlRun+"7")
	tlChain(b, tlTraceB, n.sub, "research_agent", "LangGraph", "tools.research", "", tlRun+"7", tlRun+"6")
	tlGraph(b, tlTraceB, t.inner, "research_agent")
	tlTool(b, tlTraceB, under(t.research, n.tools.id), "research", "tools", "Kyoto this week", "(the research agent's answer)", "")
	tlChain(b, tlTraceB, n.tools, "tools", "LangGraph", "", "tools", tlRun+"6", tlRun+"4")
	tlLLM(b, tlTraceB, under(t.call2, n.agent2.id), "agent", "chatcmpl-tl6", 1330, 210, 1024)
	tlChain(b, tlTraceB, n.agent2, "agent", "LangGraph", "", "agent", tlRun+"b", tlRun+"4")
	tlChain(b, tlTraceB, t.agent, "LangGraph", "LangGraph", "", "", tlRun+"4", "")
	tlGraph(b, tlTraceB, t.root, "LangGraph")
	return b
}

var (
	_ = register("agents_traceloop_turn1_a", func() ptrace.Traces { a, _ := tlTurn1(); return a.traces() })
	_ = register("agents_traceloop_turn1_b", func() ptrace.Traces { _, b := tlTurn1(); return b.traces() })
	_ = register("agents_traceloop_turn2", func() ptrace.Traces { return tlTurn2().traces() })
)
