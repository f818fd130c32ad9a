// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/privacyprocessor"
)

// Regenerate the golden files with: go test -run TestGolden -update (each
// written file fails its test, as pkg/golden does; run again without
// -update) and review the diff: every figure in them is checked by hand in
// agents_test.go too.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.yaml from the processor's output")

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
	return flatten(h.finishTraces(tb)...)
}

// finishTraces is finish's output as the batches the sink got.
func (h *harness) finishTraces(tb testing.TB) []ptrace.Traces {
	tb.Helper()
	require.NoError(tb, h.infer.Shutdown(tb.Context()))
	require.NoError(tb, h.tp.Shutdown(tb.Context()))
	return h.sink.AllTraces()
}

// checkGolden compares the output with testdata/golden/<file>.yaml in
// contrib's pkg/golden format, by ptracetest. The batches are merged first,
// one resource and scope each (canonical): how the processor splits its
// output into batches depends on the order its input came in, and no figure
// does.
func checkGolden(t *testing.T, file string, got []ptrace.Traces) {
	t.Helper()
	path := filepath.Join("testdata", "golden", file+".yaml")
	td := canonical(got...)
	if *update {
		require.NoError(t, golden.WriteTraces(t, path, td))
	}
	want, err := golden.ReadTraces(path)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(want, td,
		ptracetest.IgnoreResourceSpansOrder(), ptracetest.IgnoreScopeSpansOrder(), ptracetest.IgnoreSpansOrder()))
}

// canonical merges batches into one, a ResourceSpans per resource and a
// ScopeSpans per scope, spans in (start, name, id) order.
func canonical(tds ...ptrace.Traces) ptrace.Traces {
	out := ptrace.NewTraces()
	type scopeKey struct {
		res        [16]byte
		name, vers string
	}
	resources := map[[16]byte]ptrace.ResourceSpans{}
	scopes := map[scopeKey]ptrace.ScopeSpans{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			rk := pdatautil.MapHash(rs.Resource().Attributes())
			ors, ok := resources[rk]
			if !ok {
				ors = out.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(ors.Resource())
				ors.SetSchemaUrl(rs.SchemaUrl())
				resources[rk] = ors
			}
			for _, ss := range rs.ScopeSpans().All() {
				sk := scopeKey{rk, ss.Scope().Name(), ss.Scope().Version()}
				oss, ok := scopes[sk]
				if !ok {
					oss = ors.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(oss.Scope())
					oss.SetSchemaUrl(ss.SchemaUrl())
					scopes[sk] = oss
				}
				for _, s := range ss.Spans().All() {
					s.CopyTo(oss.Spans().AppendEmpty())
				}
			}
		}
	}
	for _, rs := range out.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			ss.Spans().Sort(func(a, b ptrace.Span) bool {
				if a.StartTimestamp() != b.StartTimestamp() {
					return a.StartTimestamp() < b.StartTimestamp()
				}
				if a.Name() != b.Name() {
					return a.Name() < b.Name()
				}
				return a.SpanID().String() < b.SpanID().String()
			})
		}
	}
	return out
}
