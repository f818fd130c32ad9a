// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/privacyprocessor"
)

// Regenerate the golden files with: go test -run TestGolden -update
// and review the diff: every figure in them is checked by hand in
// agents_test.go too.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.json from the processor's output")

// goldenSpan is an order-independent, readable form of one output span, for
// the tests that look at one span's attributes.
type goldenSpan struct {
	Resource     map[string]any `json:"resource"`
	Name         string         `json:"name"`
	TraceID      string         `json:"trace_id"`
	SpanID       string         `json:"span_id"`
	ParentSpanID string         `json:"parent_span_id,omitempty"`
	Kind         string         `json:"kind"`
	Start        string         `json:"start"`
	End          string         `json:"end"`
	Status       string         `json:"status,omitempty"`
	Attributes   map[string]any `json:"attributes"`
	Events       []goldenEvent  `json:"events,omitempty"`
}

type goldenEvent struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

func flatten(tds ...ptrace.Traces) []goldenSpan {
	var out []goldenSpan
	for _, td := range tds {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					s := spans.At(k)
					g := goldenSpan{
						Resource: rs.Resource().Attributes().AsRaw(), Name: s.Name(),
						TraceID: s.TraceID().String(), SpanID: s.SpanID().String(), ParentSpanID: s.ParentSpanID().String(),
						Kind:  s.Kind().String(),
						Start: s.StartTimestamp().AsTime().Format(time.RFC3339Nano), End: s.EndTimestamp().AsTime().Format(time.RFC3339Nano),
						Attributes: s.Attributes().AsRaw(),
					}
					if s.Status().Code() != ptrace.StatusCodeUnset {
						g.Status = s.Status().Code().String() + ": " + s.Status().Message()
					}
					for e := 0; e < s.Events().Len(); e++ {
						ev := s.Events().At(e)
						g.Events = append(g.Events, goldenEvent{Name: ev.Name(), Attributes: ev.Attributes().AsRaw()})
					}
					out = append(out, g)
				}
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Start != out[b].Start {
			return out[a].Start < out[b].Start
		}
		if out[a].Name != out[b].Name {
			return out[a].Name < out[b].Name
		}
		return out[a].SpanID < out[b].SpanID
	})
	return out
}

func readBatch(tb testing.TB, name string) ptrace.Traces {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "spans", name+".json"))
	require.NoError(tb, err)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	require.NoError(tb, err)
	return td
}

// goldenConfig is the default config.
func goldenConfig() *Config {
	return createDefaultConfig().(*Config)
}

// harness runs the privacy processor, the inference processor, then the
// agent run processor, as every shipped pipeline does: the fixtures carry
// prompts and outputs, and engine request spans reach agent_run normalized.
type harness struct {
	p     *agentRunProcessor
	tp    processor.Traces // agent_run
	infer processor.Traces // inference, in front of tp
	in    consumer.Traces  // the privacy processor, in front of infer
	sink  *consumertest.TracesSink
	now   time.Time
}

func newHarness(tb testing.TB, cfg *Config, set processor.Settings) *harness {
	tb.Helper()
	return newHarnessPhases(tb, cfg, set, true)
}

// newHarnessPhases is newHarness with the inference processor's
// phase_spans set.
func newHarnessPhases(tb testing.TB, cfg *Config, set processor.Settings, phaseSpans bool) *harness {
	tb.Helper()
	h := &harness{sink: new(consumertest.TracesSink), now: time.Unix(1767225600, 0)}
	var err error
	h.p, h.tp, err = newTraces(tb.Context(), set, cfg, h.sink)
	require.NoError(tb, err)
	h.p.now = func() time.Time { return h.now }
	inf := inferenceprocessor.NewFactory()
	icfg := inf.CreateDefaultConfig().(*inferenceprocessor.Config)
	// As the inference processor's golden files have it, so the model
	// fallback shows.
	icfg.Model.Default = "meta-llama/Llama-3.1-8B-Instruct"
	icfg.PhaseSpans = phaseSpans
	h.infer, err = inf.CreateTraces(tb.Context(), processortest.NewNopSettings(inf.Type()), icfg, h.tp)
	require.NoError(tb, err)
	pf := privacyprocessor.NewFactory()
	h.in, err = pf.CreateTraces(tb.Context(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), h.infer)
	require.NoError(tb, err)
	return h
}

func (h *harness) consume(tb testing.TB, td ptrace.Traces) {
	tb.Helper()
	require.NoError(tb, h.in.ConsumeTraces(tb.Context(), td))
}

// finish shuts down (releasing anything still held) and returns the output.
func (h *harness) finish(tb testing.TB) []goldenSpan {
	tb.Helper()
	require.NoError(tb, h.infer.Shutdown(tb.Context()))
	require.NoError(tb, h.tp.Shutdown(tb.Context()))
	return flatten(h.sink.AllTraces()...)
}

func checkGolden(t *testing.T, file string, got []goldenSpan) {
	t.Helper()
	path := filepath.Join("testdata", "golden", file+".json")
	b, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o600))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(b))
}
