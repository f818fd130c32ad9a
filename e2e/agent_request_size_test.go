// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// grpcMaxRecv is the gRPC server's default receive limit, which the OTLP
// receiver keeps unless max_recv_msg_size_mib is set: the gateway's, and
// most OTLP backends'.
const grpcMaxRecv = 4 << 20

// vllmExports is a burst of vLLM request spans as vLLM's engine exports
// them: the OpenTelemetry Python SDK's BatchSpanProcessor sends at most 512
// spans per request (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512), each span
// the llm_request of vllm_basic (vLLM's OutputProcessor.do_tracing; see
// processor/inferenceprocessor/testdata/spans/README.md) with its own trace,
// span and request id. The tests size the burst on these and send them with
// the Go SDK (sendBurst).
func vllmExports(t *testing.T, first, exports int) []ptrace.Traces {
	t.Helper()
	fixture := spanFixture(t, "vllm_basic")
	rs0 := fixture.ResourceSpans().At(0)
	tmpl := rs0.ScopeSpans().At(0).Spans().At(0)
	out := make([]ptrace.Traces, exports)
	for e := range out {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs0.Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		rs0.ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
		for i := range 512 {
			n := uint64((first+e)*512 + i + 1)
			sp := ss.Spans().AppendEmpty()
			tmpl.CopyTo(sp)
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			binary.BigEndian.PutUint64(tid[:8], n)
			binary.BigEndian.PutUint64(tid[8:], n*0x9e3779b97f4a7c15)
			binary.BigEndian.PutUint64(sid[:], n)
			sp.SetTraceID(tid)
			sp.SetSpanID(sid)
			sp.Attributes().PutStr("gen_ai.request.id", fmt.Sprintf("chatcmpl-%032x", n))
		}
		out[e] = td
	}
	return out
}

// sendBurst sends each export of burst from an engine of its own, the Go
// SDK's BatchSpanProcessor and otlptracegrpc exporter, all flushing at once
// as the engines' exporters do; every export must be accepted. BatchSize
// is above 512 so that no export leaves before the flush.
func sendBurst(t *testing.T, addr string, burst []ptrace.Traces) {
	t.Helper()
	engines := make([]*e2etest.Tracer, len(burst))
	for i, td := range burst {
		rs := td.ResourceSpans().At(0)
		engines[i] = e2etest.NewSDKTracer(t, e2etest.SDKOptions{Endpoint: addr, BatchSize: 1024,
			Resource: sdkAttrs(rs.Resource().Attributes())})
		sdkRecordSpans(t.Context(), engines[i], rs.ScopeSpans().At(0))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(engines))
	for i, e := range engines {
		wg.Go(func() { errs[i] = e.FlushErr(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "export %d", i)
		require.Equal(t, burst[i].SpanCount(), engines[i].Exported(), "export %d: spans accepted", i)
	}
}

// promSum adds up every series of a metric on a collector's own Prometheus
// endpoint whose labels contain match.
func promSum(t *testing.T, port int, name, match string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)) //nolint:noctx // loopback test helper
	require.NoError(t, err)
	defer resp.Body.Close()
	var sum float64
	s := bufio.NewScanner(resp.Body)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{")) || !strings.Contains(rest, match) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err, line)
		sum += v
	}
	return sum
}

// TestAgentBurstFitsGatewayLimit sends the shipped agent a burst of real
// vLLM-size request spans, each export small, together far above the
// gateway's 4 MiB gRPC limit, all at once, so the agent's batch processor
// merges them (8,192 spans and more per batch). Every span must arrive once
// at the gateway and at the OTLP backend behind it (a default OTLP receiver:
// 4 MiB too), with no request refused for its size on either hop.
func TestAgentBurstFitsGatewayLimit(t *testing.T) {
	ports := e2etest.NewPorts(t)
	sink := e2etest.NewSink(t)
	gwPort := ports.Port("gateway_grpc")
	gw := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env:         append(gatewayEnv(t, ports, "gateway", "127.0.0.1", gwPort, sink.Endpoint), "INFERPROF_METRICS_FLUSH_INTERVAL=1h"),
	})
	agent := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")},
		Env: agentEnv(t, ports, "agent", "127.0.0.1", gwPort, ports.Addr("gateway_grpc"))})

	const exports = 24 // 12,288 spans
	var m ptrace.ProtoMarshaler
	agentTel, gwTel := ports.Port("agent_telemetry"), ports.Port("gateway_telemetry")
	want := 0
	// A burst counts once the agent's batch processor made a batch of
	// send_batch_size (8,192 spans, over 4 MiB of these): on a loaded machine
	// the exports may straggle past its 200 ms timeout (24 SDK engines flushing at once
	// made a full batch on the first burst in 3 of 4 runs), so up to six tries.
	for round := 0; round < 6 && promSum(t, agentTel, "otelcol_processor_batch_batch_size_trigger_send", "") == 0; round++ {
		burst := vllmExports(t, round*exports, exports)
		total := 0
		for _, td := range burst {
			size := m.TracesSize(td)
			require.Less(t, size, grpcMaxRecv, "each export alone fits")
			total += size
		}
		perSpan := float64(total) / float64(exports*512)
		t.Logf("burst %d: %d spans, %d B encoded (%.0f B per span); 8,192 spans are %.1f MiB",
			round, exports*512, total, perSpan, perSpan*8192/(1<<20))
		require.Greater(t, perSpan*8192, float64(grpcMaxRecv), "one batch processor batch of these spans is above the limit")

		sendBurst(t, ports.Addr("agent_grpc"), burst)
		want += exports * 512
		require.Eventually(t, func() bool {
			return promSum(t, agentTel, "otelcol_exporter_sent_spans", `exporter="load_balancing"`)+
				promSum(t, agentTel, "otelcol_exporter_send_failed_spans", `exporter="load_balancing"`) >= float64(want)
		}, 2*time.Minute, 100*time.Millisecond, "the agent passed the burst on")
	}
	require.Positive(t, promSum(t, agentTel, "otelcol_processor_batch_batch_size_trigger_send", ""),
		"the agent's batch processor made a full batch, over the gateway's limit")
	assert.Zero(t, promSum(t, agentTel, "otelcol_exporter_send_failed_spans", ""), "no span refused on the way to the gateway")
	require.Eventually(t, func() bool {
		return promSum(t, gwTel, "otelcol_receiver_accepted_spans", `receiver="otlp"`) >= float64(want)
	}, time.Minute, 100*time.Millisecond, "the gateway accepted every span")

	// Behind the gateway: each request span once (the gateway adds phase
	// spans, which are not counted here).
	seen := func() map[pcommon.SpanID]int {
		ids := map[pcommon.SpanID]int{}
		for _, td := range sink.Traces.AllTraces() {
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, sp := range ss.Spans().All() {
						if sp.Name() == "llm_request" {
							ids[sp.SpanID()]++
						}
					}
				}
			}
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(seen()) >= want }, time.Minute, 200*time.Millisecond,
		"every request span reached the backend behind the gateway")
	agent.Stop()
	gw.Stop()
	ids := seen()
	assert.Len(t, ids, want)
	for id, n := range ids {
		if !assert.Equal(t, 1, n, "span %s arrived %d times", id, n) {
			break
		}
	}
	for name, out := range map[string]string{"agent": agent.Output(), "gateway": gw.Output()} {
		assert.NotContains(t, out, "larger than max", "%s log", name)
	}
}
