// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
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
)

// The two tiers, as shipped: config/agent.yaml on every GPU node,
// config/gateway.yaml behind them, each run from the built binary with only
// its endpoints set through environment variables. Off Kubernetes the agent
// runs k8s_attributes in passthrough mode (INFERPROF_K8S_PASSTHROUGH) and
// needs a node name (K8S_NODE_NAME), as the DaemonSet gives it.

// agentEnv is the environment of one agent: its own listeners, and the
// gateways it sends to (hostname: what the load_balancing exporter resolves).
func agentEnv(t *testing.T, ports *e2etest.Ports, name, gwHostname string, gwPort int, gwEndpoint string) []string {
	t.Helper()
	dir := socketDir(t)
	// An engine-targets folder of its own that exists: the default
	// (/tmp/inferprof/engines) may be missing on a fresh machine, and the
	// prometheus receiver's file_sd logs an error watching a missing one.
	targets := filepath.Join(t.TempDir(), "engines")
	require.NoError(t, os.MkdirAll(targets, 0o700))
	return []string{
		"INFERPROF_ENGINE_TARGETS_DIR=" + targets,
		"INFERPROF_OTLP_GRPC_ENDPOINT=" + ports.Addr(name+"_grpc"),
		"INFERPROF_OTLP_HTTP_ENDPOINT=" + ports.Addr(name+"_http"),
		"INFERPROF_HEALTH_ENDPOINT=" + ports.Addr(name+"_health"),
		fmt.Sprintf("INFERPROF_TELEMETRY_PORT=%d", ports.Port(name+"_telemetry")),
		"INFERPROF_STEP_ENDPOINT=" + filepath.Join(dir, "step.sock"),
		"INFERPROF_CUPTI_ENDPOINT=" + filepath.Join(dir, "cupti.sock"),
		"INFERPROF_GATEWAY_HOSTNAME=" + gwHostname,
		fmt.Sprintf("INFERPROF_GATEWAY_PORT=%d", gwPort),
		"INFERPROF_GATEWAY_ENDPOINT=" + gwEndpoint,
		"INFERPROF_K8S_PASSTHROUGH=true",
		"K8S_NODE_NAME=" + name,
	}
}

// gatewayEnv is the environment of one gateway listening on host:grpcPort
// and exporting to sink.
func gatewayEnv(t *testing.T, ports *e2etest.Ports, name, host string, grpcPort int, sink string) []string {
	t.Helper()
	return []string{
		fmt.Sprintf("INFERPROF_OTLP_GRPC_ENDPOINT=%s:%d", host, grpcPort),
		"INFERPROF_HEALTH_ENDPOINT=" + ports.Addr(name+"_health"),
		"INFERPROF_PROMETHEUS_ENDPOINT=" + ports.Addr(name+"_prometheus"),
		fmt.Sprintf("INFERPROF_TELEMETRY_PORT=%d", ports.Port(name+"_telemetry")),
		"INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT=" + ports.Addr(name+"_graphsignal"),
		"INFERPROF_UI_ENDPOINT=" + ports.Addr(name+"_ui"),
		"INFERPROF_DATA_DIR=" + t.TempDir(),
		"INFERPROF_EXPORT_OTLP_ENDPOINT=" + sink,
		"INFERPROF_EXPORT_OTLP_INSECURE=true",
		"GRAPHSIGNAL_API_KEY=",
	}
}

// singleOverlay sends the shipped default.yaml's trace export and metrics to
// an OTLP sink as well, so the one-collector reference can be compared with
// the gateway's output.
const singleOverlay = `
exporters:
  otlp_grpc/reference:
    endpoint: SINK
    tls:
      insecure: true
service:
  pipelines:
    traces/export:
      exporters: [file/traces, otlp_grpc/reference]
    metrics:
      exporters: [prometheus, otlp_grpc/reference]
`

// traceClient is pdata's gRPC client, not the SDK: it sends the recorded
// fixtures byte for byte, whose ids and timestamps the goldens hold.
func traceClient(t *testing.T, endpoint string) ptraceotlp.GRPCClient {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return ptraceotlp.NewGRPCClient(conn)
}

func export(t *testing.T, c ptraceotlp.GRPCClient, batches ...string) {
	t.Helper()
	for _, b := range batches {
		_, err := c.Export(t.Context(), ptraceotlp.NewExportRequestFromTraces(spanFixture(t, b)))
		require.NoError(t, err, "export %s", b)
	}
}

// bySpanID indexes spans, leaving out the resource: agents add their own
// (k8s.pod.ip, host.name) to it.
func bySpanID(tds []ptrace.Traces) map[pcommon.SpanID]ptrace.Span {
	out := map[pcommon.SpanID]ptrace.Span{}
	for _, s := range allSpans(tds) {
		out[s.SpanID()] = s
	}
	return out
}

// histograms sums count and sum of every gen_ai.server.* histogram.
func histograms(all []pmetric.Metrics) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, md := range all {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if !strings.HasPrefix(m.Name(), "gen_ai.server.") || m.Type() != pmetric.MetricTypeHistogram {
						continue
					}
					v := out[m.Name()]
					for _, dp := range m.Histogram().DataPoints().All() {
						v[0] += float64(dp.Count())
						v[1] += dp.Sum()
					}
					out[m.Name()] = v
				}
			}
		}
	}
	return out
}

// TestTopologyTwoAgentsOneGateway splits a PD-disaggregated SGLang request
// over two nodes: the prefill server's stage spans reach agent A; the root
// spans (which the tokenizer managers on node B export) and the decode
// server's stages reach agent B. Two vLLM requests go through agent A too,
// one carrying prompt and completion content. The gateway's output must be
// what one collector (the shipped default.yaml) makes of all the spans: the
// same spans with the same canonical figures and no content, and the same
// gen_ai.server.* counts and sums.
func TestTopologyTwoAgentsOneGateway(t *testing.T) {
	nodeA := []string{"sglang_pd_prefill_stages", "vllm_basic", "vllm_content"}
	nodeB := []string{"sglang_pd_prefill_root", "sglang_pd_decode_root", "sglang_pd_decode_stages"}
	ports := e2etest.NewPorts(t)

	// The reference: one collector given every span, roots first.
	refSink := e2etest.NewSink(t)
	overlay := filepath.Join(t.TempDir(), "overlay.yaml")
	writeFile(t, overlay, strings.Replace(singleOverlay, "SINK", refSink.Endpoint, 1))
	refPorts := e2etest.NewPorts(t)
	ref := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml"), overlay},
		Env:         append(defaultEnv(t, refPorts, socketDir(t)), "INFERPROF_METRICS_FLUSH_INTERVAL=1h"),
	})
	refClient := traceClient(t, refPorts.Addr("otlp_grpc"))
	export(t, refClient, nodeB...)
	export(t, refClient, nodeA...)

	// The tiers.
	sink := e2etest.NewSink(t)
	gwPort := ports.Port("gateway_grpc")
	gw := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env:         append(gatewayEnv(t, ports, "gateway", "127.0.0.1", gwPort, sink.Endpoint), "INFERPROF_METRICS_FLUSH_INTERVAL=1h"),
	})
	gwAddr := ports.Addr("gateway_grpc")
	agentA := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")},
		Env: agentEnv(t, ports, "agent_a", "127.0.0.1", gwPort, gwAddr)})
	agentB := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")},
		Env: agentEnv(t, ports, "agent_b", "127.0.0.1", gwPort, gwAddr)})
	export(t, traceClient(t, ports.Addr("agent_b_grpc")), nodeB...)
	export(t, traceClient(t, ports.Addr("agent_a_grpc")), nodeA...)

	require.Eventually(t, func() bool {
		n := refSink.Traces.SpanCount()
		return n > 0 && sink.Traces.SpanCount() >= n
	}, 60*time.Second, 50*time.Millisecond, "the gateway passes on as many spans as one collector")
	// Stopping flushes the connectors' metrics (the interval is an hour, so
	// exactly one flush each).
	agentA.Stop()
	agentB.Stop()
	gw.Stop()
	ref.Stop()

	want := bySpanID(refSink.Traces.AllTraces())
	got := bySpanID(sink.Traces.AllTraces())
	require.Len(t, got, len(want))
	for id, w := range want {
		g, ok := got[id]
		if !assert.True(t, ok, "span %s (%s) missing at the gateway's sink", id, w.Name()) {
			continue
		}
		assert.NoError(t, ptracetest.CompareSpan(w, g), "span %s (%s)", id, w.Name())
	}
	// Content was sent (vllm_content) and reached no exporter.
	for _, s := range got {
		for k := range s.Attributes().All() {
			assert.False(t, strings.HasPrefix(k, "gen_ai.prompt") || strings.HasPrefix(k, "gen_ai.completion"),
				"%s on span %s reached the gateway's exporter", k, s.Name())
		}
		for _, ev := range s.Events().All() {
			assert.False(t, strings.HasPrefix(ev.Name(), "gen_ai."), "content event %s on span %s", ev.Name(), s.Name())
		}
	}
	// The join ran at the gateway: each PD root carries the queue time of
	// its server's waiting stage, whose spans came through another agent
	// (prefill) or in another batch (decode).
	var queued []string
	for _, s := range got {
		for _, k := range []string{"gen_ai.latency.time_in_queue", "inferprof.latency.time_in_decode_queue"} {
			if _, ok := s.Attributes().Get(k); ok && strings.Contains(s.Name(), "Req ") {
				queued = append(queued, s.Name()+": "+k)
			}
		}
	}
	sort.Strings(queued)
	assert.Equal(t, []string{
		"decode Req 5e6f7a8b: inferprof.latency.time_in_decode_queue",
		"prefill Req 5e6f7a8b: gen_ai.latency.time_in_queue",
	}, queued)

	wantH, gotH := histograms(refSink.Metrics.AllMetrics()), histograms(sink.Metrics.AllMetrics())
	require.NotEmpty(t, wantH["gen_ai.server.request.duration"], "the reference counted requests")
	assert.Equal(t, wantH, gotH, "gen_ai.server.* count and sum")
	checkHistograms(t, goldentest.Merge(sink.Traces.AllTraces()...), sink.Metrics.AllMetrics())
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
}
