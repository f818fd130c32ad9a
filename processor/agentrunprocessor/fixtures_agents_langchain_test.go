// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// A plain LangChain agent (no LangGraph) traced by OpenLLMetry: the
// program of OpenLLMetry's own test, packages/opentelemetry-instrumentation-
// langchain/tests/test_agents.py (traceloop/openllmetry @93429cfb, 0.62.1):
// create_tool_calling_agent(ChatOpenAI, tools, prompt) run by AgentExecutor,
// here with ainvoke, ChatOpenAI(model="gpt-4o", temperature=0,
// stream_usage=True) and three tools, get_time with handle_tool_error=True.
// Turn 1 of the shared layout: the three tool calls run in parallel, one
// fails.
//
//   - AgentExecutor.ainvoke: on_chain_start with no parent run, so
//     callback_handler.py on_chain_start makes the workflow span
//     "AgentExecutor.workflow" (_create_task_span: traceloop.span.kind
//     workflow, gen_ai.operation.name invoke_agent, gen_ai.agent.name,
//     gen_ai.agent.id the run id; provider "langchain", no LangGraph flow).
//     No thread_id in a config: no gen_ai.conversation.id, so no turns.
//   - Each step (langchain_classic/agents/agent.py, langchain-ai/langchain
//     @0fb7dff8, _aiter_next_step): aplan streams the agent's
//     RunnableSequence with run_manager.get_child(), so a task span
//     "execute_task RunnableSequence" under the workflow, holding
//     RunnableAssign<agent_scratchpad> > RunnableParallel<agent_scratchpad>
//     > RunnableLambda, ChatPromptTemplate, "ChatOpenAI.chat" and
//     ToolsAgentOutputParser: the span names test_agents.py asserts.
//   - The chat span (_create_llm_span) carries the model's metadata, the
//     LangSmith params ChatOpenAI._get_ls_params adds (ls_provider,
//     ls_model_name, ls_model_type, ls_temperature), as
//     traceloop.association.properties.*. Streamed: on_llm_end gets no
//     llm_output, so gen_ai.response.model stays the request's and there
//     is no gen_ai.response.id; usage comes from usage_metadata
//     (set_chat_response_usage), cache_read from input_token_details.
//   - Tools: asyncio.gather over _aperform_agent_action, each tool.arun
//     with run_manager.get_child(): "execute_tool {name}" spans directly
//     under the workflow (entity path ""), overlapping.
//   - get_time raises ToolException; with handle_tool_error the tool
//     (langchain_core/tools/base.py arun) calls on_tool_end with the error
//     text, not on_tool_error: OpenLLMetry's span says success. The
//     failure is invisible in the spans, so the run has no tool errors.
//     (Without handle_tool_error the exception ends the whole run.)

const lcTrace = "5c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5"

const lcRun = "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9"

func lcBatch() *spanfixture.Batch { return olBatch("travel-agent") }

// lcStep is one plan step's RunnableSequence and its parts.
type lcStep struct{ seq, assign, parallel, lambda, prompt, parser agentStep }

var lcSteps = [2]lcStep{
	{
		seq:      agentStep{"a100000000000041", turn1.agent.id, 0.050, 2.150},
		assign:   agentStep{"a100000000000042", "a100000000000041", 0.052, 0.058},
		parallel: agentStep{"a100000000000043", "a100000000000042", 0.053, 0.057},
		lambda:   agentStep{"a100000000000044", "a100000000000043", 0.054, 0.056},
		prompt:   agentStep{"a100000000000045", "a100000000000041", 0.059, 0.060},
		parser:   agentStep{"a100000000000046", "a100000000000041", 2.110, 2.120},
	},
	{
		seq:      agentStep{"a100000000000051", turn1.agent.id, 5.450, 8.750},
		assign:   agentStep{"a100000000000052", "a100000000000051", 5.452, 5.458},
		parallel: agentStep{"a100000000000053", "a100000000000052", 5.453, 5.457},
		lambda:   agentStep{"a100000000000054", "a100000000000053", 5.454, 5.456},
		prompt:   agentStep{"a100000000000055", "a100000000000051", 5.459, 5.460},
		parser:   agentStep{"a100000000000056", "a100000000000051", 8.710, 8.720},
	},
}

// lcLangSmith is the chat model's metadata: ChatOpenAI._get_ls_params.
var lcLangSmith = []any{
	"traceloop.association.properties.ls_provider", "openai",
	"traceloop.association.properties.ls_model_name", "gpt-4o",
	"traceloop.association.properties.ls_model_type", "chat",
	"traceloop.association.properties.ls_temperature", 0.0,
}

// lcTask is a chain run under the executor: a task span.
func lcTask(b *spanfixture.Batch, st agentStep, name, path, runID, parentRun string) {
	olChain(b, lcTrace, st, name, "AgentExecutor", path, "langchain", nil, runID, parentRun,
		`{"inputs": {"input": "(the question)", "intermediate_steps": []}, "tags": [], "metadata": {}, "kwargs": {"name": "`+name+`"}}`,
		`{"outputs": "(the step's output)", "kwargs": {}}`)
}

// lcPlan is one plan step, its spans in the order they end; run is the
// step's first run id suffix (six runs).
func lcPlan(b *spanfixture.Batch, i int, call agentStep, run byte, c olCall) {
	st, id := lcSteps[i], func(k byte) string { return lcRun + string("0123456789abcdef"[run+k]) }
	const seq = "RunnableSequence"
	const assign = "RunnableAssign<agent_scratchpad>"
	const parallel = "RunnableParallel<agent_scratchpad>"
	lcTask(b, st.lambda, "RunnableLambda", seq+"."+assign+"."+parallel, id(3), id(2))
	lcTask(b, st.parallel, parallel, seq+"."+assign, id(2), id(1))
	lcTask(b, st.assign, assign, seq, id(1), id(0))
	lcTask(b, st.prompt, "ChatPromptTemplate", seq, id(4), id(0))
	c.workflow, c.path, c.props = "AgentExecutor", seq, lcLangSmith
	olLLM(b, lcTrace, agentStep{call.id, st.seq.id, call.start, call.end}, c)
	lcTask(b, st.parser, "ToolsAgentOutputParser", seq, id(5), id(0))
	lcTask(b, st.seq, seq, "", id(0), lcRun+"0")
}

func lcTool(b *spanfixture.Batch, st agentStep, name, args, result string) {
	olTool(b, lcTrace, st, name, "AgentExecutor", "", "langchain", nil, args, result, "")
}

func lcTurn() (first, second *spanfixture.Batch) {
	first, second = lcBatch(), lcBatch()
	t := turn1
	lcPlan(first, 0, t.call1, 1, olCall{respModel: "gpt-4o", finish: "tool_call", in: 812, out: 64, cacheKnown: true})
	// Handled ToolException: ends through on_tool_end with the error text.
	lcTool(first, t.clock, "get_time", "{'tz': 'Asia/Tokio'}", "unknown time zone Asia/Tokio")
	lcTool(first, t.paris, "get_weather", "{'city': 'Paris'}", "18C, cloudy")
	lcTool(second, t.tokyo, "get_weather", "{'city': 'Tokyo'}", "24C, clear")
	lcPlan(second, 1, t.call2, 7, olCall{respModel: "gpt-4o", finish: "stop", in: 1210, out: 142, cached: 768, cacheKnown: true})
	olChain(second, lcTrace, agentStep{t.agent.id, "", t.agent.start, t.agent.end}, "AgentExecutor", "AgentExecutor", "", "langchain", nil,
		lcRun+"0", "",
		`{"inputs": {"input": "What's the weather in Paris and Tokyo?"}, "tags": [], "metadata": {}, "kwargs": {"name": "AgentExecutor"}}`,
		`{"outputs": {"input": "(the question)", "output": "(the answer)"}, "kwargs": {}}`)
	return first, second
}

var (
	_ = generators.Register("agents_langchain_a", func() ptrace.Traces { a, _ := lcTurn(); return a.Traces() })
	_ = generators.Register("agents_langchain_b", func() ptrace.Traces { _, b := lcTurn(); return b.Traces() })
)
