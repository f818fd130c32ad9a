// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferprof/inferprof/internal/e2etest"
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
func engineRun(t *testing.T, batches []string, wantSpans int) ([]goldenSpan, []pmetric.Metrics) {
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
	return flattenSpans(sink.Traces.AllTraces()...), sink.Metrics.AllMetrics()
}

// checkEngine runs batches in order and reversed against the union of the
// given golden files.
func checkEngine(t *testing.T, batches []string, goldens ...string) {
	t.Helper()
	var want []goldenSpan
	for _, g := range goldens {
		want = append(want, goldenFile(t, g)...)
	}
	sortSpans(want)
	reversed := slices.Clone(batches)
	slices.Reverse(reversed)
	for name, order := range map[string][]string{"in order": batches, "reversed": reversed} {
		t.Run(name, func(t *testing.T) {
			got, metrics := engineRun(t, order, len(want))
			wb, err := json.Marshal(want)
			require.NoError(t, err)
			gb, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, string(wb), string(gb), "the binary's output is the processor's golden output")
			checkHistograms(t, want, metrics)
		})
	}
}

// checkHistograms compares the connector's gen_ai.server.* histograms with
// what the request spans carry: every request span (one with e2e or TTFT)
// counts in request.duration; TTFT and TPOT only when it did not fail.
func checkHistograms(t *testing.T, spans []goldenSpan, metrics []pmetric.Metrics) {
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
	for _, s := range spans {
		ttft, hasTTFT := s.Attributes[names.AttrTimeToFirstToken].(float64)
		e2e, hasE2E := s.Attributes[names.AttrE2E].(float64)
		if !hasTTFT && !hasE2E {
			continue
		}
		if !hasE2E {
			e2e = s.duration()
		}
		want["gen_ai.server.request.duration"].count++
		want["gen_ai.server.request.duration"].sum += e2e
		if _, failed := s.Attributes[names.AttrErrorType]; failed {
			continue
		}
		if hasTTFT {
			want["gen_ai.server.time_to_first_token"].count++
			want["gen_ai.server.time_to_first_token"].sum += ttft
		}
		if tpot, ok := s.Attributes[names.AttrTimePerOutputTok].(float64); ok {
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

// goldenSpan mirrors the processor's golden file entries.
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

func (s goldenSpan) duration() float64 {
	a, errA := time.Parse(time.RFC3339Nano, s.Start)
	b, errB := time.Parse(time.RFC3339Nano, s.End)
	if errA != nil || errB != nil || !b.After(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

func processorTestdata(parts ...string) string {
	return filepath.Join(append([]string{e2etest.RepoRoot(), "processor", "inferenceprocessor", "testdata"}, parts...)...)
}

func spanFixture(t testing.TB, name string) ptrace.Traces {
	t.Helper()
	b, err := os.ReadFile(processorTestdata("spans", name+".json"))
	require.NoError(t, err)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	require.NoError(t, err)
	return td
}

func goldenFile(t *testing.T, name string) []goldenSpan {
	t.Helper()
	b, err := os.ReadFile(processorTestdata("golden", name+".json"))
	require.NoError(t, err)
	var out []goldenSpan
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// flattenSpans is the processor's golden form of what the sink received.
func flattenSpans(tds ...ptrace.Traces) []goldenSpan {
	var out []goldenSpan
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
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
					for _, ev := range s.Events().All() {
						g.Events = append(g.Events, goldenEvent{Name: ev.Name(), Attributes: ev.Attributes().AsRaw()})
					}
					out = append(out, g)
				}
			}
		}
	}
	sortSpans(out)
	return out
}

func sortSpans(out []goldenSpan) {
	sort.Slice(out, func(a, b int) bool {
		if out[a].Start != out[b].Start {
			return out[a].Start < out[b].Start
		}
		if out[a].Name != out[b].Name {
			return out[a].Name < out[b].Name
		}
		return out[a].SpanID < out[b].SpanID
	})
}
