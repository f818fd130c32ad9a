// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/spanfixture"
)

// Agent fixtures: one conversation of two turns per instrumentation, built
// from each instrumentation's code (cited beside each generator and in
// testdata/spans/README.md). Every instrumentation gets the same agent
// behaviour, so the figures can be compared across them:
//
// Turn 1 (trace ...a1, T0+0 s to T0+9 s): a model call that asks for three
// tools, which run in parallel (overlapping); one of them fails; a second
// model call writes the answer.
//
//	agent run            0.000 ─ 9.000
//	  model call #1      0.100 ─ 2.100
//	  tool paris         2.200 ─ 4.200   }
//	  tool tokyo         2.250 ─ 5.250   } in parallel
//	  tool get_time      2.300 ─ 2.400   } fails
//	  model call #2      5.500 ─ 8.700
//
// Turn 2 (trace ...b2, T0+20 s to T0+27 s): an agent used as a tool.
//
//	agent run            20.000 ─ 27.000
//	  model call         20.100 ─ 21.100
//	  tool research      21.200 ─ 25.200
//	    agent run        21.250 ─ 25.150   (the research agent)
//	      model call     21.300 ─ 23.300
//	      tool search    23.400 ─ 24.000
//	      model call     24.100 ─ 25.100
//	  model call         25.300 ─ 26.800
//
// Where a fixture has engine spans, turn 1's model calls went to a vLLM
// server: an httpx CLIENT span "POST" under each call (opentelemetry-
// instrumentation-httpx 0.66b0.dev @466ae4c0, _get_default_span_name, old
// HTTP semconv by default) carries traceparent, and vLLM's llm_request is
// its child (shared/reference/engines-and-semconv.md §1.5: do_tracing uses
// the extracted context as the parent).

// agentStep is one span of the behaviour above, in seconds from T0.
type agentStep struct {
	id, parent string
	start, end float64
}

// Span ids: trace a1 (turn 1), b2 (turn 2); the same layout in every
// fixture, with the instrumentation's own trace ids.
var turn1 = struct{ root, agent, call1, paris, tokyo, clock, call2 agentStep }{
	root:  agentStep{"a100000000000001", "", -0.010, 9.005},
	agent: agentStep{"a100000000000002", "a100000000000001", 0.000, 9.000},
	call1: agentStep{"a100000000000003", "a100000000000002", 0.100, 2.100},
	paris: agentStep{"a100000000000004", "a100000000000002", 2.200, 4.200},
	tokyo: agentStep{"a100000000000005", "a100000000000002", 2.250, 5.250},
	clock: agentStep{"a100000000000006", "a100000000000002", 2.300, 2.400},
	call2: agentStep{"a100000000000007", "a100000000000002", 5.500, 8.700},
}

var turn2 = struct{ root, agent, call1, research, inner, innerCall1, search, innerCall2, call2 agentStep }{
	root:       agentStep{"b200000000000001", "", 19.990, 27.005},
	agent:      agentStep{"b200000000000002", "b200000000000001", 20.000, 27.000},
	call1:      agentStep{"b200000000000003", "b200000000000002", 20.100, 21.100},
	research:   agentStep{"b200000000000004", "b200000000000002", 21.200, 25.200},
	inner:      agentStep{"b200000000000005", "b200000000000004", 21.250, 25.150},
	innerCall1: agentStep{"b200000000000006", "b200000000000005", 21.300, 23.300},
	search:     agentStep{"b200000000000007", "b200000000000005", 23.400, 24.000},
	innerCall2: agentStep{"b200000000000008", "b200000000000005", 24.100, 25.100},
	call2:      agentStep{"b200000000000009", "b200000000000002", 25.300, 26.800},
}

// turn1Engine are the vLLM figures of turn 1's two model calls, where they
// reached our engine.
var turn1Engine = [2]engineFigures{{0.400, 0.150, 1.350, 812, 64}, {0.900, 0.250, 2.050, 1210, 142}}

type engineFigures struct {
	queue, prefill, decode float64
	in, out                int
}

func engineCall(i int) engineFigures { return turn1Engine[i] }

// at adds a step as a span of b.
func at(b *spanfixture.Batch, trace string, s agentStep, name string, kind ptrace.SpanKind) ptrace.Span {
	return b.Span(name, kind, trace, s.id, s.parent, spanfixture.NS(spanfixture.T0+s.start), spanfixture.NS(spanfixture.T0+s.end))
}

// vllmUnder adds the engine side of one model call to a vLLM batch: the
// httpx span goes to the agent's batch (http), vLLM's llm_request to the
// engine's (eng). queue, prefill and decode are the engine's figures.
func vllmUnder(http, eng *spanfixture.Batch, trace string, call agentStep, postID, reqID, engineReq string, e engineFigures) {
	promptLen, generated, queue, prefill, decode := e.in, e.out, e.queue, e.prefill, e.decode
	post := agentStep{postID, call.id, call.start + 0.010, call.end - 0.010}
	s := at(http, trace, post, "POST", ptrace.SpanKindClient)
	spanfixture.Put(s.Attributes(),
		"http.method", "POST",
		"http.url", "http://vllm.internal:8000/v1/chat/completions",
		"http.status_code", 200)
	// vLLM: arrival a few ms after the client sent; queued just after
	// arrival on the engine's monotonic clock; the frontend's 20 ms sits
	// between arrival and the queue.
	arrival := spanfixture.T0 + post.start + 0.005
	const mono = 5000.0
	st := spanfixture.VLLMStats{
		Arrival: arrival, Queued: mono, Scheduled: mono + queue,
		FirstToken: mono + queue + prefill, LastToken: mono + queue + prefill + decode,
		FirstTokenLatency: 0.020 + queue + prefill, Generated: generated,
	}
	r := spanfixture.VLLMRequest{
		TraceID: trace, SpanID: reqID, ExternalReqID: engineReq, PromptLen: promptLen, Finish: "stop",
		MaxTokens: 1024, N: 1, IterationStamp: arrival + 0.020 + queue + prefill + decode + 0.004, EndDelay: 0.0005,
	}
	sp := eng.DoTracing(st, r)
	sp.SetParentSpanID(s.SpanID())
}
