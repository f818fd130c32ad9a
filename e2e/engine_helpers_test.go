// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/goldentest"
	"github.com/inferprof/inferprof/internal/names"
)

// The per-engine tests (engine_*_test.go) send the inference processor's
// span fixtures, each one export batch as the engine's own processes send
// them (processor/inferenceprocessor/testdata/spans/README.md says which
// engine code each follows), to the built binary with a real OTLP/gRPC
// client, in one order and then the reverse. The traces that reach a real
// OTLP sink must be exactly the processor's golden files (canonical
// attributes and phase spans included), and the gen_ai.server.* histograms
// must count and sum exactly the figures on those spans.

const engineConfig = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
processors:
  privacy: {}
  step_figures: {}
  inference:
    model:
      default: meta-llama/Llama-3.1-8B-Instruct
connectors:
  inference_metrics: {}
exporters:
  otlp_grpc:
    endpoint: SINK
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [privacy, step_figures, inference]
      exporters: [otlp_grpc, inference_metrics]
    metrics:
      receivers: [inference_metrics]
      exporters: [otlp_grpc]
`

// engineRun sends batches in order and returns what reached the sink after
// the collector stopped (which flushes the connector's metrics).
func engineRun(t *testing.T, batches []string, wantSpans int) (ptrace.Traces, []pmetric.Metrics) {
	t.Helper()
	sink := e2etest.NewSink(t)
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), engineConfig)
	c := e2etest.Start(t, e2etest.Options{Config: strings.Replace(cfg, "SINK", sink.Endpoint, 1)})

	conn, err := grpc.NewClient(ports.Addr("otlp"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	// Not the SDK: the recorded fixtures go byte for byte (ids, timestamps,
	// batches as the engine split them), which the goldens hold.
	client := ptraceotlp.NewGRPCClient(conn)
	for _, b := range batches {
		_, err := client.Export(t.Context(), ptraceotlp.NewExportRequestFromTraces(spanFixture(t, b)))
		require.NoError(t, err, "export %s", b)
	}
	require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= wantSpans },
		30*time.Second, 20*time.Millisecond, "want %d spans at the sink", wantSpans)
	c.Stop()
	return goldentest.Merge(sink.Traces.AllTraces()...), sink.Metrics.AllMetrics()
}

// checkEngine runs batches in order and reversed against the union of the
// given golden files.
func checkEngine(t *testing.T, batches []string, goldens ...string) {
	t.Helper()
	paths := make([]string, len(goldens))
	for i, g := range goldens {
		paths[i] = processorTestdata("golden", g+".yaml")
	}
	want := goldentest.Read(t, paths...)
	reversed := slices.Clone(batches)
	slices.Reverse(reversed)
	for name, order := range map[string][]string{"in order": batches, "reversed": reversed} {
		t.Run(name, func(t *testing.T) {
			got, metrics := engineRun(t, order, want.SpanCount())
			goldentest.Equal(t, want, got, "the binary's output is the processor's golden output")
			checkHistograms(t, want, metrics)
		})
	}
}

// checkHistograms compares the connector's gen_ai.server.* histograms with
// what the request spans carry: every request span (one with e2e or TTFT)
// counts in request.duration; TTFT and TPOT only when it did not fail.
func checkHistograms(t *testing.T, td ptrace.Traces, metrics []pmetric.Metrics) {
	t.Helper()
	type agg struct {
		count uint64
		sum   float64
	}
	want := map[string]*agg{
		"gen_ai.server.request.duration":      {},
		"gen_ai.server.time_to_first_token":   {},
		"gen_ai.server.time_per_output_token": {},
	}
	for _, s := range allSpans([]ptrace.Traces{td}) {
		ttft, hasTTFT := double(s, names.AttrTimeToFirstToken)
		e2e, hasE2E := double(s, names.AttrE2E)
		if !hasTTFT && !hasE2E {
			continue
		}
		if !hasE2E {
			e2e = duration(s)
		}
		want["gen_ai.server.request.duration"].count++
		want["gen_ai.server.request.duration"].sum += e2e
		if _, failed := s.Attributes().Get(names.AttrErrorType); failed {
			continue
		}
		if hasTTFT {
			want["gen_ai.server.time_to_first_token"].count++
			want["gen_ai.server.time_to_first_token"].sum += ttft
		}
		if tpot, ok := double(s, names.AttrTimePerOutputTok); ok {
			want["gen_ai.server.time_per_output_token"].count++
			want["gen_ai.server.time_per_output_token"].sum += tpot
		}
	}
	for name, w := range want {
		var count uint64
		var sum float64
		for _, md := range metrics {
			for _, rm := range md.ResourceMetrics().All() {
				for _, sm := range rm.ScopeMetrics().All() {
					for _, m := range sm.Metrics().All() {
						if m.Name() != name || m.Type() != pmetric.MetricTypeHistogram {
							continue
						}
						for _, dp := range m.Histogram().DataPoints().All() {
							count += dp.Count()
							sum += dp.Sum()
						}
					}
				}
			}
		}
		assert.Equal(t, w.count, count, "%s count", name)
		assert.InDelta(t, w.sum, sum, 1e-9, "%s sum", name)
	}
	require.Positive(t, want["gen_ai.server.request.duration"].count, "the scenario has request spans")
}

func processorTestdata(parts ...string) string {
	return filepath.Join(append([]string{e2etest.RepoRoot(), "processor", "inferenceprocessor", "testdata"}, parts...)...)
}

func spanFixture(t testing.TB, name string) ptrace.Traces {
	t.Helper()
	td, err := golden.ReadTraces(processorTestdata("spans", name+".json"))
	require.NoError(t, err)
	return td
}

// double is a span's double attribute; another type is no figure.
func double(s ptrace.Span, key string) (float64, bool) {
	v, ok := s.Attributes().Get(key)
	if !ok || v.Type() != pcommon.ValueTypeDouble {
		return 0, false
	}
	return v.Double(), true
}

// duration is the span's length in seconds; 0 when it ends before it starts.
func duration(s ptrace.Span) float64 {
	if s.EndTimestamp() <= s.StartTimestamp() {
		return 0
	}
	return s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime()).Seconds()
}
