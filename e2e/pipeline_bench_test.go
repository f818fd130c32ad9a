// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// The end-to-end CPU comparison of issue 16 (make bench-e2e): the collector
// process's CPU time, from /proc/<pid>/stat, for 100,000 vLLM request spans
// sent by a real OTLP/gRPC client, in two pipelines of the same binary:
//
//   - config=default: config/default.yaml as shipped (privacy, inference
//     with phase spans, inference_metrics to Prometheus, the graphsignal
//     exporter's local timeline, the trace export to a file);
//   - config=default_no_phase_spans: the same with the inference
//     processor's phase_spans off, which shows what the three extra spans
//     per request cost in the trace export (they are most of the gap);
//   - config=span_metrics: what a user without inferprof runs for request
//     metrics: otlp, memory_limiter and batch, then contrib's span_metrics
//     (its defaults) to Prometheus and the same trace export to a file.
//
// Each sub-benchmark starts its collector, sends one round to warm it up,
// then measures b.N rounds. A round ends when every trace exporter has
// counted every span it was due (the requests, and the phase spans the
// inference processor reports it added), so batching and export queues are
// inside the figure. make bench-e2e runs the test binary several times,
// reversing the order of the configurations every other run, and compares
// them with benchstat.

const (
	e2eBenchSpans = 100_000
	// e2eBenchBatch is the OpenTelemetry SDK's default max export batch.
	e2eBenchBatch = 512
)

const spanMetricsConfig = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp_grpc"}}
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: 80
    spike_limit_percentage: 20
  batch: {}
connectors:
  span_metrics: {}
exporters:
  prometheus:
    endpoint: {{addr "prometheus"}}
  file/traces:
    path: {{.Dir}}/traces.jsonl
    rotation:
      max_megabytes: 100
      max_backups: 3
service:
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {{port "telemetry"}}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [span_metrics, file/traces]
    metrics:
      receivers: [span_metrics]
      processors: [memory_limiter, batch]
      exporters: [prometheus]
`

func BenchmarkPipelineCPU(b *testing.B) {
	order := []string{"span_metrics", "default", "default_no_phase_spans"}
	if os.Getenv("BENCH_E2E_ORDER") == "reverse" {
		slices.Reverse(order)
	}
	template := vllmTemplate(b)
	for _, name := range order {
		b.Run("config="+name, func(b *testing.B) {
			ports := e2etest.NewPorts(b)
			dir := b.TempDir()
			var opts e2etest.Options
			exts := "[pprof]"
			switch name {
			case "default", "default_no_phase_spans":
				opts = e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: defaultEnv(b, ports, dir)}
				exts = "[health_check, pprof]"
				if name == "default_no_phase_spans" {
					overlay := filepath.Join(dir, "no_phase_spans.yaml")
					require.NoError(b, os.WriteFile(overlay, []byte("processors:\n  inference:\n    phase_spans: false\n"), 0o600))
					opts.ConfigFiles = append(opts.ConfigFiles, overlay)
				}
			default:
				cfg := filepath.Join(dir, "span_metrics.yaml")
				require.NoError(b, os.WriteFile(cfg, []byte(e2etest.Render(b, ports, dir, spanMetricsConfig)), 0o600))
				opts = e2etest.Options{ConfigFiles: []string{cfg}}
			}
			if ov := os.Getenv("BENCH_E2E_OVERLAY_" + name); ov != "" {
				overlay := filepath.Join(dir, "overlay.yaml")
				require.NoError(b, os.WriteFile(overlay, []byte(ov), 0o600))
				opts.ConfigFiles = append(opts.ConfigFiles, overlay)
			}
			profile := os.Getenv("BENCH_E2E_PROFILE")
			if profile != "" {
				// The pprof extension, merged over the configuration.
				overlay := filepath.Join(dir, "pprof.yaml")
				require.NoError(b, os.WriteFile(overlay, []byte(fmt.Sprintf(
					"extensions:\n  pprof:\n    endpoint: %s\nservice:\n  extensions: %s\n", ports.Addr("pprof"), exts)), 0o600))
				opts.ConfigFiles = append(opts.ConfigFiles, overlay)
			}
			col := e2etest.Start(b, opts)
			conn, err := grpc.NewClient(ports.Addr("otlp_grpc"), grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(b, err)
			b.Cleanup(func() { _ = conn.Close() })
			r := &e2eRound{client: ptraceotlp.NewGRPCClient(conn), telemetry: ports.Port("telemetry"), template: template}
			r.run(b) // warm-up: the heap and every series in place
			if profile != "" {
				// A CPU profile of one more round, from the pprof extension.
				done := make(chan []byte)
				go func() {
					resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", ports.Addr("pprof"), 8)) //nolint:noctx // loopback
					if err != nil {
						done <- nil
						return
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					done <- body
				}()
				r.run(b)
				prof := <-done
				require.NotEmpty(b, prof)
				require.NoError(b, os.WriteFile(filepath.Join(profile, name+".pprof"), prof, 0o600))
			}
			var cpu time.Duration
			for b.Loop() {
				before := procCPU(b, col.PID())
				r.run(b)
				cpu += procCPU(b, col.PID()) - before
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/100k-spans")
			col.Stop()
		})
	}
}

// e2eRound sends e2eBenchSpans request spans and waits until the trace
// exporters have counted all they were due.
type e2eRound struct {
	client    ptraceotlp.GRPCClient
	telemetry int
	template  ptrace.Traces
	next      int // numbers the spans, so every round sends new ones
}

func (r *e2eRound) run(b *testing.B) {
	b.Helper()
	exported0 := telemetrySum(b, r.telemetry, "otelcol_exporter_sent_spans")
	phases0 := telemetrySum(b, r.telemetry, "otelcol_processor_inference_phase_spans")
	exporters := len(telemetrySeries(b, r.telemetry, "otelcol_exporter_sent_spans"))
	for sent := 0; sent < e2eBenchSpans; sent += e2eBenchBatch {
		td := r.batch(min(e2eBenchBatch, e2eBenchSpans-sent))
		_, err := r.client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
		require.NoError(b, err)
	}
	phases := telemetrySum(b, r.telemetry, "otelcol_processor_inference_phase_spans") - phases0
	if exporters == 0 {
		// Before the first export no exporter has a series yet.
		require.Eventually(b, func() bool {
			exporters = len(telemetrySeries(b, r.telemetry, "otelcol_exporter_sent_spans"))
			return exporters > 0
		}, time.Minute, 20*time.Millisecond)
	}
	want := exported0 + float64(exporters)*(e2eBenchSpans+phases)
	var got float64
	require.Eventually(b, func() bool {
		got = telemetrySum(b, r.telemetry, "otelcol_exporter_sent_spans")
		return got >= want
	}, 2*time.Minute, 20*time.Millisecond, "spans exported")
	require.Zero(b, telemetrySum(b, r.telemetry, "otelcol_exporter_send_failed_spans"), "spans the exporters failed to send")
}

// batch returns n copies of the template's request span, each with its own
// trace, span and request id, one a millisecond. Not the SDK: the figure is
// the collector's CPU, and encoding in the client would share its cores.
func (r *e2eRound) batch(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	r.template.ResourceSpans().At(0).Resource().CopyTo(td.ResourceSpans().AppendEmpty().Resource())
	rs := td.ResourceSpans().At(0)
	ss := rs.ScopeSpans().AppendEmpty()
	src := r.template.ResourceSpans().At(0).ScopeSpans().At(0)
	src.Scope().CopyTo(ss.Scope())
	tmpl := src.Spans().At(0)
	spans := ss.Spans()
	spans.EnsureCapacity(n)
	for range n {
		i := r.next
		r.next++
		s := spans.AppendEmpty()
		tmpl.CopyTo(s)
		var tid pcommon.TraceID
		var sid pcommon.SpanID
		for j := range 8 {
			tid[j] = byte(i >> (8 * j))
			sid[j] = byte(i >> (8 * j))
		}
		tid[15] = 1
		s.SetTraceID(tid)
		s.SetSpanID(sid)
		shift := pcommon.Timestamp(i) * pcommon.Timestamp(time.Millisecond)
		s.SetStartTimestamp(tmpl.StartTimestamp() + shift)
		s.SetEndTimestamp(tmpl.EndTimestamp() + shift)
		s.Attributes().PutStr(names.AttrRequestID, "chatcmpl-"+strconv.Itoa(i))
	}
	return td
}

// vllmTemplate is the vllm_basic fixture (a vLLM V1 llm_request span; its
// source is in processor/inferenceprocessor/testdata/spans/README.md).
func vllmTemplate(tb testing.TB) ptrace.Traces {
	td := spanFixture(tb, "vllm_basic")
	require.Equal(tb, 1, td.SpanCount())
	return td
}

// telemetrySeries returns the values of every series of a metric on the
// collector's own Prometheus endpoint.
func telemetrySeries(tb testing.TB, port int, name string) []float64 {
	tb.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)) //nolint:noctx // loopback bench helper
	require.NoError(tb, err)
	defer resp.Body.Close()
	var out []float64
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || !(strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "_total")) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(tb, err, line)
		out = append(out, v)
	}
	require.NoError(tb, s.Err())
	return out
}

func telemetrySum(tb testing.TB, port int, name string) float64 {
	sum := 0.0
	for _, v := range telemetrySeries(tb, port, name) {
		sum += v
	}
	return sum
}
