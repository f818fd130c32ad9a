# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""One small real agent against the tiny CPU vLLM, traced by a real
instrumentation, for make agents-real (run.py starts it).

--sdk picks the agent and its instrumentation:
  openai-agents-contrib       OpenAI Agents SDK + opentelemetry-instrumentation-openai-agents-v2
  openai-agents-openinference OpenAI Agents SDK + openinference-instrumentation-openai-agents
  langgraph-openllmetry       LangGraph + opentelemetry-instrumentation-langchain (OpenLLMetry)

Each conversation has two turns; each turn is one agent run of two model
calls with one tool call between them. The tiny model has random weights,
so the first call is forced to call the tool with tool_choice="required"
(vLLM's structured outputs, parallel_tool_calls=False so one call), and the
second is left to answer. opentelemetry-instrumentation-httpx puts each
call's traceparent on its request, so vLLM's llm_request span joins the
agent's trace. The script's own clock around each model call (the httpx
transport, body read included), each tool and each run goes to --out: the
independent measurement the figures are held against.
"""

import argparse
import json
import random
import time

import httpx
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

TOOL_SECONDS = 3.0  # the tool's own work: well over a tiny-model call, so it is the bottleneck
CITIES = ["paris", "tokyo"]
clock = {"model": [], "tool": [], "run": []}


def note(kind, t0, t1, **kw):
    clock[kind].append(dict(start=t0, end=t1, **kw))


def weather(city):
    """The local tool: a little deterministic work that takes TOOL_SECONDS."""
    t0 = time.time()
    rng = random.Random(city)
    deadline = t0 + TOOL_SECONDS
    n = 0
    while time.time() < deadline:  # busy, like a real local computation
        n += rng.randint(0, 9)
    t1 = time.time()
    note("tool", t0, t1, name="get_weather")
    return f"{city}: {n % 30} C"


class TimedAsyncTransport(httpx.AsyncHTTPTransport):
    async def handle_async_request(self, request):
        t0 = time.time()
        resp = await super().handle_async_request(request)
        await resp.aread()
        note("model", t0, time.time(), path=request.url.path, status=resp.status_code)
        return resp


class TimedTransport(httpx.HTTPTransport):
    def handle_request(self, request):
        t0 = time.time()
        resp = super().handle_request(request)
        resp.read()
        note("model", t0, time.time(), path=request.url.path, status=resp.status_code)
        return resp


def run_openai_agents(args, instrumentation):
    import asyncio
    from typing import Literal

    import agents
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    # No export to OpenAI's tracing backend: only the instrumentation's processor.
    agents.set_trace_processors([])
    session = None
    if instrumentation == "contrib":
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        OpenAIAgentsInstrumentor().instrument(tracer_provider=trace.get_tracer_provider())
    else:
        from openinference.instrumentation import using_session
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        OpenAIAgentsInstrumentor().instrument(tracer_provider=trace.get_tracer_provider())
        session = using_session

    client = AsyncOpenAI(base_url=args.base_url, api_key="none",
                         http_client=httpx.AsyncClient(transport=TimedAsyncTransport()))
    agents.set_default_openai_client(client, use_for_tracing=False)

    @function_tool
    def get_weather(city: Literal["paris", "tokyo"]) -> str:
        """The weather in a city."""
        return weather(city)

    agent = Agent(
        name="Weather agent", instructions="Answer with the weather.",
        model=OpenAIChatCompletionsModel(model=args.model, openai_client=client),
        tools=[get_weather],
        # reset_tool_choice (the default) sends no tool_choice after the tool ran.
        model_settings=ModelSettings(tool_choice="required", parallel_tool_calls=False,
                                     max_tokens=args.max_tokens, temperature=0),
    )

    async def turns():
        for i in range(args.turns):
            t0 = time.time()
            if session:
                with session(args.conversation):
                    await Runner.run(agent, f"weather in {CITIES[i % 2]}")
            else:
                await Runner.run(agent, f"weather in {CITIES[i % 2]}")
            note("run", t0, time.time(), turn=i + 1)

    asyncio.run(turns())


def run_langgraph(args):
    from typing import Literal

    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    LangchainInstrumentor().instrument(tracer_provider=trace.get_tracer_provider())

    @tool
    def get_weather(city: Literal["paris", "tokyo"]) -> str:
        """The weather in a city."""
        return weather(city)

    llm = ChatOpenAI(model=args.model, base_url=args.base_url, api_key="none", temperature=0,
                     max_tokens=args.max_tokens, http_client=httpx.Client(transport=TimedTransport()))
    forced = llm.bind_tools([get_weather], tool_choice="required", parallel_tool_calls=False)

    def agent_node(state):
        # First call: the tool, forced; after the tool's answer: text.
        last = state["messages"][-1]
        model = llm if last.type == "tool" else forced
        return {"messages": [model.invoke(state["messages"])]}

    def route(state):
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    g = StateGraph(MessagesState)
    g.add_node("agent", agent_node)
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    graph = g.compile(name="weather_graph")
    for i in range(args.turns):
        t0 = time.time()
        # OpenLLMetry reads the conversation id from LangGraph's thread_id.
        graph.invoke({"messages": [HumanMessage(f"weather in {CITIES[i % 2]}")]},
                     config={"configurable": {"thread_id": args.conversation}})
        note("run", t0, time.time(), turn=i + 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sdk", required=True,
                   choices=["openai-agents-contrib", "openai-agents-openinference", "langgraph-openllmetry"])
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--otlp", required=True, help="OTLP/HTTP traces URL of the collector")
    p.add_argument("--out", required=True)
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--conversation", default="")
    args = p.parse_args()
    args.conversation = args.conversation or f"conv-{args.sdk}"

    provider = TracerProvider(resource=Resource.create({"service.name": f"agent-{args.sdk}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.otlp)))
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)

    if args.sdk.startswith("openai-agents"):
        run_openai_agents(args, args.sdk.split("-")[-1])
    else:
        run_langgraph(args)
    provider.shutdown()  # flushes the batch processor
    with open(args.out, "w") as f:
        json.dump(clock, f, indent=1)


if __name__ == "__main__":
    main()
