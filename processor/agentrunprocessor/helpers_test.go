// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/internal/goldentest"
	"github.com/inferprof/inferprof/processor/inferenceprocessor"
	"github.com/inferprof/inferprof/processor/privacyprocessor"
)

// Regenerate the golden files with: go test -run TestGolden -update (each
// written file fails its test, as pkg/golden does; run again without
// -update) and review the diff: every figure in them is checked by hand in
// agents_test.go too.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.yaml from the processor's output")

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
func (h *harness) finish(tb testing.TB) []agentrecording.Span {
	tb.Helper()
	return agentrecording.Flatten(h.finishTraces(tb)...)
}

// finishTraces is finish's output as the batches the sink got.
func (h *harness) finishTraces(tb testing.TB) []ptrace.Traces {
	tb.Helper()
	require.NoError(tb, h.infer.Shutdown(tb.Context()))
	require.NoError(tb, h.tp.Shutdown(tb.Context()))
	return h.sink.AllTraces()
}

// checkGolden compares the output with testdata/golden/<file>.yaml by
// internal/goldentest: how the processor splits its output into batches
// depends on the order its input came in, and no figure does. The spans are
// written in (start, name, id) order so that -update rewrites a file the
// same whatever the order.
func checkGolden(t *testing.T, file string, got []ptrace.Traces) {
	t.Helper()
	td := goldentest.Merge(got...)
	for _, rs := range td.ResourceSpans().All() {
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
	goldentest.Check(t, goldenPath(file), *update, td)
}

func goldenPath(file string) string {
	return filepath.Join("testdata", "golden", file+".yaml")
}
