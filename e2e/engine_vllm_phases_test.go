// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// TestVLLMEnginePhaseSpansOnce: where vLLM writes its own phase spans under
// llm_request (PR 44402's vllm.request.queue/prefill/decode), the shipped
// default config writes each request to the traces file with the engine's
// three phase spans and none of ours, whichever export batch the SDK's
// BatchSpanProcessor put them in; a request whose engine wrote none gets
// our three, once.
func TestVLLMEnginePhaseSpansOnce(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dataDir := t.TempDir()
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         defaultEnv(t, ports, dataDir),
	})
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", "vllm"))
	tr := tracer.Tracer("vllm.llm_engine")
	phases := []string{"vllm.request.queue", "vllm.request.prefill", "vllm.request.decode"}

	// Each order says, batch by batch, which spans end before the next
	// flush: r the request span, q/p/d its phases. The first, one batch,
	// is how the processor learns that this engine writes phase spans:
	// until it has seen one, it holds no synthetic phase span back (so
	// vLLM 0.32's requests are not delayed), and a phases-after request
	// would get ours as well (processor README, "Engine phase spans").
	orders := []struct {
		id      string
		batches [][]string
	}{
		{"cmpl-same", [][]string{{"q", "p", "d", "r"}}},
		{"cmpl-before", [][]string{{"q", "p", "d"}, {"r"}}},
		{"cmpl-after", [][]string{{"r"}, {"q", "p", "d"}}},
		{"cmpl-split", [][]string{{"q"}, {"r"}, {"p", "d"}}},
		{"cmpl-three", [][]string{{"r"}, {"q"}, {"p", "d"}}},
	}
	base := time.Now().Add(-10 * time.Second).Truncate(time.Microsecond)
	for i, o := range orders {
		spec := vllmRequest(base.Add(time.Duration(i) * 2 * time.Second))
		withRequestID(&spec, o.id)
		ctx, req := tr.Start(t.Context(), spec.Name, trace.WithTimestamp(spec.Start),
			trace.WithSpanKind(spec.Kind), trace.WithAttributes(spec.Attributes...))
		spans := map[string]trace.Span{"r": req}
		ends := map[string]time.Time{"r": spec.End}
		at := spec.Start
		for j, name := range phases {
			end := spec.Start.Add(time.Duration(j+1) * 400 * time.Millisecond)
			_, s := tr.Start(ctx, name, trace.WithTimestamp(at))
			spans[name[len("vllm.request."):len("vllm.request.")+1]] = s
			ends[name[len("vllm.request."):len("vllm.request.")+1]] = end
			at = end
		}
		for _, batch := range o.batches {
			for _, k := range batch {
				spans[k].End(trace.WithTimestamp(ends[k]))
			}
			tracer.Flush(t)
		}
	}
	// Beside them, a request as vLLM 0.32 writes it: no phase spans.
	plain := vllmRequest(base.Add(12 * time.Second))
	withRequestID(&plain, "cmpl-plain")
	tracer.Send(t.Context(), "vllm.llm_engine", plain)
	tracer.Flush(t)

	path := filepath.Join(dataDir, "inferprof-traces.jsonl")
	require.Eventually(t, func() bool {
		return len(requestsByID(readTraces(t, path))) == len(orders)+1
	}, 30*time.Second, 100*time.Millisecond, "every request in %s", path)
	// Shutdown releases whatever the processor still holds, so a late
	// synthetic copy would be in the file now.
	c.Stop()
	batches := readTraces(t, path)
	reqs := requestsByID(batches)
	children := map[string]map[string]int{} // parent span id → name → count
	synthetic := map[string]int{}
	eachSpan(batches, func(s ptrace.Span) {
		p := s.ParentSpanID().String()
		if children[p] == nil {
			children[p] = map[string]int{}
		}
		children[p][s.Name()]++
		if v, ok := s.Attributes().Get(names.AttrSynthetic); ok && v.Bool() {
			synthetic[p]++
		}
	})
	for _, o := range orders {
		r, ok := reqs[o.id]
		require.Truef(t, ok, "%s missing", o.id)
		assert.Equal(t, 1, r.n, "%s once", o.id)
		for _, name := range phases {
			assert.Equalf(t, 1, children[r.spanID][name], "%s: %s once", o.id, name)
		}
		assert.Zerof(t, synthetic[r.spanID], "%s: no second copy of the phases", o.id)
	}
	r := reqs["cmpl-plain"]
	assert.Equal(t, 1, r.n)
	assert.Equal(t, 3, synthetic[r.spanID], "the request whose engine wrote no phase spans gets ours, once")
	for _, name := range []string{names.SpanPhaseQueue, names.SpanPhasePrefill, names.SpanPhaseDecode} {
		assert.Equalf(t, 1, children[r.spanID][name], "cmpl-plain: %s once", name)
	}
}

func withRequestID(spec *e2etest.SpanSpec, id string) {
	for i, kv := range spec.Attributes {
		if kv.Key == names.AttrRequestID {
			spec.Attributes[i] = attribute.String(names.AttrRequestID, id)
		}
	}
}

type seenRequest struct {
	spanID string
	n      int
}

// requestsByID finds the processed request spans (those with e2e) by
// gen_ai.request.id.
func requestsByID(batches []ptrace.Traces) map[string]seenRequest {
	out := map[string]seenRequest{}
	eachSpan(batches, func(s ptrace.Span) {
		id, ok := s.Attributes().Get(names.AttrRequestID)
		if _, done := s.Attributes().Get(names.AttrE2E); !ok || !done {
			return
		}
		r := out[id.Str()]
		r.spanID = s.SpanID().String()
		r.n++
		out[id.Str()] = r
	})
	return out
}

func eachSpan(batches []ptrace.Traces, fn func(ptrace.Span)) {
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					fn(spans.At(k))
				}
			}
		}
	}
}
