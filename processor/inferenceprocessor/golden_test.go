// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/goldentest"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/privacyprocessor"
)

// Regenerate the golden files with: go test -run TestGolden -update
// (the run fails, by golden.WriteTraces' design) and review the diff: every
// figure in them is checked by hand in processor_test.go too.
var update = flag.Bool("update", false, "rewrite testdata/golden/* from the processor's output")

func readBatch(tb testing.TB, name string) ptrace.Traces {
	tb.Helper()
	td, err := golden.ReadTraces(filepath.Join("testdata", "spans", name+".json"))
	require.NoError(tb, err)
	return td
}

// goldenConfig is the default config plus a default model, so the model
// fallback shows in the golden files.
func goldenConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Model.Default = "meta-llama/Llama-3.1-8B-Instruct"
	return cfg
}

// harness runs the privacy processor, then the inference processor, as
// every shipped pipeline does: the fixtures carry prompts and outputs, and
// what the tests assert is what leaves a collector.
type harness struct {
	p    *inferenceProcessor
	tp   processor.Traces
	in   consumer.Traces // the privacy processor, in front of tp
	sink *consumertest.TracesSink
	now  time.Time
}

func newHarness(tb testing.TB, cfg *Config, set processor.Settings) *harness {
	tb.Helper()
	h := &harness{sink: new(consumertest.TracesSink), now: time.Unix(1767225600, 0)}
	var err error
	h.p, h.tp, err = newTraces(tb.Context(), set, cfg, h.sink)
	require.NoError(tb, err)
	pf := privacyprocessor.NewFactory()
	h.in, err = pf.CreateTraces(tb.Context(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), h.tp)
	require.NoError(tb, err)
	h.p.now = func() time.Time { return h.now }
	return h
}

func (h *harness) consume(tb testing.TB, td ptrace.Traces) {
	tb.Helper()
	require.NoError(tb, h.in.ConsumeTraces(tb.Context(), td))
}

// output shuts down (releasing anything still held) and returns the
// batches that came out.
func (h *harness) output(tb testing.TB) []ptrace.Traces {
	tb.Helper()
	require.NoError(tb, h.tp.Shutdown(tb.Context()))
	return h.sink.AllTraces()
}

// goldenCases run each engine's export batches through the processor, in
// every order the engines' processes can deliver them, against one golden
// file per scenario.
var goldenCases = []struct {
	name   string
	golden string
	orders [][]string
	expire bool // advance the clock past the join wait before shutdown
}{
	{name: "vllm basic", golden: "vllm_basic", orders: [][]string{{"vllm_basic"}}},
	{name: "vllm temperature 0", golden: "vllm_temperature0", orders: [][]string{{"vllm_temperature0"}}},
	{name: "vllm one output token", golden: "vllm_one_token", orders: [][]string{{"vllm_one_token"}}},
	{name: "vllm aborted before the first token", golden: "vllm_aborted", orders: [][]string{{"vllm_aborted"}}},
	{name: "vllm errors", golden: "vllm_error", orders: [][]string{{"vllm_error"}}},
	{name: "vllm bad values", golden: "vllm_bad_values", orders: [][]string{{"vllm_bad_values"}}},
	{name: "vllm phases exceed e2e", golden: "vllm_phases_exceed_e2e", orders: [][]string{{"vllm_phases_exceed_e2e"}}},
	{name: "vllm content removed", golden: "vllm_content", orders: [][]string{{"vllm_content"}}},
	{name: "vllm journey tracing", golden: "vllm_journey", orders: [][]string{
		{"vllm_journey_api", "vllm_journey_core"}, {"vllm_journey_core", "vllm_journey_api"}}},
	{name: "tensorrt-llm", golden: "trtllm", orders: [][]string{{"trtllm", "trtllm_handler"}, {"trtllm_handler", "trtllm"}}},
	{name: "tensorrt-llm cancelled", golden: "trtllm_cancelled", orders: [][]string{{"trtllm_cancelled"}}},
	{name: "tgi", golden: "tgi", orders: [][]string{{"tgi", "tgi_infer"}, {"tgi_infer", "tgi"}}},
	{name: "tgi failed", golden: "tgi_failed", orders: [][]string{{"tgi_failed", "tgi_failed_infer"}, {"tgi_failed_infer", "tgi_failed"}}},
	{name: "sglang level 1", golden: "sglang_level1", orders: [][]string{
		{"sglang_root_level1", "sglang_stages_level1"}, {"sglang_stages_level1", "sglang_root_level1"}}},
	{name: "sglang level 3", golden: "sglang_level3", orders: [][]string{
		{"sglang_root", "sglang_stages_level3"}, {"sglang_stages_level3", "sglang_root"}}},
	{name: "sglang legacy root name", golden: "sglang_legacy", orders: [][]string{
		{"sglang_root_legacy", "sglang_stages_level1"}, {"sglang_stages_level1", "sglang_root_legacy"}}},
	{name: "sglang root without stages", golden: "sglang_no_stages", orders: [][]string{{"sglang_root"}}, expire: true},
	{name: "sglang aborted", golden: "sglang_abort", orders: [][]string{
		{"sglang_abort_root", "sglang_abort_stages"}, {"sglang_abort_stages", "sglang_abort_root"}}},
	{name: "sglang prefill/decode disaggregation", golden: "sglang_pd", orders: [][]string{
		{"sglang_pd_prefill_root", "sglang_pd_decode_root", "sglang_pd_prefill_stages", "sglang_pd_decode_stages"},
		{"sglang_pd_prefill_stages", "sglang_pd_decode_stages", "sglang_pd_prefill_root", "sglang_pd_decode_root"},
		{"sglang_pd_decode_stages", "sglang_pd_prefill_root", "sglang_pd_decode_root", "sglang_pd_prefill_stages"},
		{"sglang_pd_decode_root", "sglang_pd_prefill_stages", "sglang_pd_decode_stages", "sglang_pd_prefill_root"},
	}},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		for i, order := range tc.orders {
			t.Run(fmt.Sprintf("%s/order %d", tc.name, i), func(t *testing.T) {
				h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
				for _, b := range order {
					h.consume(t, readBatch(t, b))
				}
				if tc.expire {
					h.now = h.now.Add(time.Minute)
					h.p.expire(t.Context(), h.now)
				}
				// Only the first order writes; the others must match it.
				goldentest.Check(t, filepath.Join("testdata", "golden", tc.golden+".yaml"), *update && i == 0, h.output(t)...)
			})
		}
	}
}

// TestGoldenPassthrough: spans that are not engine requests, engine.step
// spans included, leave exactly as they came.
func TestGoldenPassthrough(t *testing.T) {
	h := newHarness(t, goldenConfig(), processortest.NewNopSettings(metadata.Type))
	h.consume(t, readBatch(t, "passthrough"))
	got := goldentest.Merge(h.output(t)...)
	goldentest.Equal(t, readBatch(t, "passthrough"), got)
	require.Equal(t, 3, got.SpanCount())
}
