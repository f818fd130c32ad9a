// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/spanfixture"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// treeFromBytes decodes fuzz input into the spans of one trace, spread over
// up to four export batches: per span a role, a parent (none, any span of
// the trace, itself, or one never sent), a start, a duration (possibly
// negative) and an error bit. Loops and missing parents come out naturally.
func treeFromBytes(data []byte) []ptrace.Traces {
	const rec = 5
	n := min(len(data)/rec, 64)
	batches := make([]*spanfixture.Batch, 4)
	for i := range batches {
		batches[i] = spanfixture.NewBatch("fuzz", "service.name", "fuzz")
	}
	trace := "0102030405060708090a0b0c0d0e0f10"
	id := func(i int) string { return pcommon.SpanID{0: 0xf0, 6: byte(i >> 8), 7: byte(i)}.String() }
	for i := range n {
		r := data[i*rec : (i+1)*rec]
		parent := ""
		switch p := int(r[1]); {
		case p == 0:
		case p == 255:
			parent = pcommon.SpanID{0xee, 7: byte(i)}.String() // never sent
		default:
			parent = id((p - 1) % max(n, 1)) // may be itself, or a descendant
		}
		start := spanfixture.T0 + float64(r[2])/10
		end := start + (float64(int8(r[3])))/20
		b := batches[r[4]&3]
		var s ptrace.Span
		switch r[0] % 7 {
		case 0:
			s = b.Span("invoke_agent a", ptrace.SpanKindInternal, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
			spanfixture.Put(s.Attributes(), "gen_ai.operation.name", "invoke_agent", "gen_ai.agent.name", "a", "gen_ai.conversation.id", "c")
		case 1:
			s = b.Span("execute_tool t", ptrace.SpanKindInternal, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
			spanfixture.Put(s.Attributes(), "gen_ai.operation.name", "execute_tool", "gen_ai.tool.name", "t")
		case 2:
			s = b.Span("chat m", ptrace.SpanKindClient, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
			spanfixture.Put(s.Attributes(), "gen_ai.operation.name", "chat", "gen_ai.request.model", "m",
				"gen_ai.usage.input_tokens", int(r[2]), "gen_ai.usage.output_tokens", int(r[3]))
		case 3:
			s = b.Span("LLM", ptrace.SpanKindInternal, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
			spanfixture.Put(s.Attributes(), "openinference.span.kind", "LLM", "llm.model_name", "m")
		case 4:
			s = b.Span("POST /run", ptrace.SpanKindServer, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
		case 5:
			s = b.Span("llm_request", ptrace.SpanKindServer, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
			spanfixture.Put(s.Attributes(), names.AttrTimeToFirstToken, 0.2, names.AttrE2E, 1.0, names.AttrTimeInQueue, 0.1,
				names.AttrTimeInPrefill, 0.1, names.AttrTimeInDecode, 0.8, "gen_ai.usage.prompt_tokens", 10,
				"gen_ai.usage.completion_tokens", 5)
		default:
			s = b.Span("POST", ptrace.SpanKindClient, trace, id(i), parent, spanfixture.NS(start), spanfixture.NS(end))
		}
		if r[4]&4 != 0 {
			s.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	out := make([]ptrace.Traces, 0, 4)
	for _, b := range batches {
		if b.Len() > 0 {
			out = append(out, b.Traces())
		}
	}
	return out
}

// checkAgentOutput: every span sent comes out once (phase spans aside), and
// every run's figures are finite, non-negative and add up to its duration.
func checkAgentOutput(t *testing.T, in []ptrace.Traces, out []ptrace.Traces) {
	t.Helper()
	sent := map[string]int{}
	for _, s := range agentrecording.Flatten(in...) {
		sent[s.SpanID]++
	}
	got := map[string]int{}
	for _, s := range agentrecording.Flatten(out...) {
		if s.Attributes[names.AttrSynthetic] == true {
			continue
		}
		got[s.SpanID]++
		a := s.Attributes
		model, ok := a[names.AttrAgentTimeInModel].(float64)
		if !ok {
			continue
		}
		tools, other := a[names.AttrAgentTimeInTools].(float64), a[names.AttrAgentTimeInOther].(float64)
		for _, v := range []float64{model, tools, other} {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0) || v < 0, "%s: %v", s.Name, a)
		}
		start, err1 := time.Parse(time.RFC3339Nano, s.Start)
		end, err2 := time.Parse(time.RFC3339Nano, s.End)
		require.NoError(t, err1)
		require.NoError(t, err2)
		if d := end.Sub(start).Seconds(); d > 0 {
			require.InDelta(t, d, model+tools+other, 1e-6, "%s: %v", s.Name, a)
		}
	}
	require.Equal(t, sent, got)
}

func runTree(t *testing.T, cfg *Config, tds []ptrace.Traces) []ptrace.Traces {
	t.Helper()
	in := make([]ptrace.Traces, len(tds))
	for i, td := range tds {
		in[i] = ptrace.NewTraces()
		td.CopyTo(in[i])
	}
	sink := new(consumertest.TracesSink)
	p, tp, err := newTraces(t.Context(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	now := time.Unix(1767225600, 0)
	p.now = func() time.Time { return now }
	for _, td := range tds {
		require.NoError(t, tp.ConsumeTraces(t.Context(), td))
	}
	now = now.Add(cfg.Agents.Wait)
	p.expire(t.Context(), now)
	require.NoError(t, tp.Shutdown(t.Context()))
	checkAgentOutput(t, in, sink.AllTraces())
	return sink.AllTraces()
}

func FuzzAgentTrees(f *testing.F) {
	// A run, a call under it, a tool under the run, a server top.
	f.Add([]byte{4, 0, 0, 100, 0, 0, 1, 1, 90, 1, 2, 2, 2, 20, 2, 1, 2, 30, 30, 3})
	// A loop: 0 -> 1 -> 0.
	f.Add([]byte{0, 2, 0, 50, 0, 2, 1, 5, 20, 1})
	// Missing parents and a span that is its own parent.
	f.Add([]byte{0, 255, 0, 50, 0, 2, 2, 5, 20, 1, 5, 3, 6, 8, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := goldenConfig()
		cfg.Agents.MaxSpansPerTrace = 50
		runTree(t, cfg, treeFromBytes(data))
	})
}

// TestAgentTenThousandChildren: an agent run with 10k tool calls, in one
// batch, then split across batches; past max_spans_per_trace it is marked
// truncated, below it every call counts.
func TestAgentTenThousandChildren(t *testing.T) {
	const n = 10_000
	build := func(batches int) []ptrace.Traces {
		bs := make([]*spanfixture.Batch, batches)
		for i := range bs {
			bs[i] = spanfixture.NewBatch("app", "service.name", "app")
		}
		trace := "0102030405060708090a0b0c0d0e0f10"
		run := "00000000000000a1"
		for i := range n {
			s := bs[i%batches].Span("execute_tool t", ptrace.SpanKindInternal, trace,
				pcommon.SpanID{0: 1, 6: byte(i >> 8), 7: byte(i)}.String(), run,
				spanfixture.NS(spanfixture.T0+float64(i)*0.001), spanfixture.NS(spanfixture.T0+float64(i)*0.001+0.0015))
			spanfixture.Put(s.Attributes(), "gen_ai.operation.name", "execute_tool", "gen_ai.tool.name", "t")
		}
		r := bs[batches-1].Span("invoke_agent a", ptrace.SpanKindInternal, trace, run, "", spanfixture.NS(spanfixture.T0), spanfixture.NS(spanfixture.T0+11))
		spanfixture.Put(r.Attributes(), "gen_ai.operation.name", "invoke_agent")
		out := make([]ptrace.Traces, batches)
		for i, b := range bs {
			out[i] = b.Traces()
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		perTrace int
		batches  int
	}{{"truncated", 5000, 1}, {"complete", 20000, 1}, {"split", 20000, 7}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := goldenConfig()
			cfg.Agents.MaxSpansPerTrace = tc.perTrace
			out := runTree(t, cfg, build(tc.batches))
			var run agentrecording.Span
			for _, s := range agentrecording.Flatten(out...) {
				if s.Name == "invoke_agent a" {
					run = s
				}
			}
			if tc.perTrace < n {
				assert.Equal(t, "truncated", run.Attributes[names.AttrAgentPartial])
				return
			}
			assert.NotContains(t, run.Attributes, names.AttrAgentPartial)
			assert.EqualValues(t, n, run.Attributes[names.AttrAgentToolCalls])
			// The calls overlap by 0.5 ms: their union runs from 0 to the last end.
			assert.InDelta(t, float64(n-1)*0.001+0.0015, run.Attributes[names.AttrAgentTimeInTools], 1e-6)
		})
	}
}
