// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// The gateways' DNS name, as a headless Service gives it: one address per
// gateway. The agent resolves it through a hosts file of its own (a private
// mount namespace with the file bound over /etc/hosts), so the test can take
// a gateway out of DNS the way Kubernetes drops a dead pod's address.
const gatewayName = "inferprof-gateway-headless.test"

// hostsAgentWrapper runs the agent with hostsFile as its /etc/hosts; it
// skips the test where mount namespaces are not allowed (not root).
func hostsAgentWrapper(t *testing.T, hostsFile string) []string {
	t.Helper()
	if err := exec.Command("unshare", "--mount", "--propagation", "private", "true").Run(); err != nil {
		t.Skipf("needs a private mount namespace (unshare --mount, as root) to give the agent its own DNS view: %v", err)
	}
	return []string{"unshare", "--mount", "--propagation", "private",
		"sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hostsFile}
}

func writeHosts(t *testing.T, path string, ips ...string) {
	t.Helper()
	text := "127.0.0.1 localhost\n"
	for _, ip := range ips {
		text += ip + " " + gatewayName + "\n"
	}
	// Written in place: the bind mount follows the file, not its name.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// failoverRequest is one vLLM llm_request span (vllm/tracing.py attribute
// names), numbered i, ending now.
func failoverRequest(i int, now time.Time) e2etest.SpanSpec {
	return e2etest.SpanSpec{
		Name: "llm_request", Kind: trace.SpanKindServer, Start: now.Add(-time.Second), End: now,
		Attributes: []attribute.KeyValue{
			attribute.String("gen_ai.request.id", fmt.Sprintf("cmpl-failover-%d", i)),
			attribute.String("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct"),
			attribute.Int("gen_ai.usage.prompt_tokens", 16),
			attribute.Int("gen_ai.usage.completion_tokens", 8),
			attribute.Float64("gen_ai.latency.time_in_queue", 0.01),
			attribute.Float64("gen_ai.latency.time_to_first_token", 0.1),
			attribute.Float64("gen_ai.latency.e2e", 1.0),
			attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.05),
			attribute.Float64("gen_ai.latency.time_in_model_decode", 0.85),
			attribute.Float64("gen_ai.latency.time_in_model_inference", 0.9),
		},
	}
}

// TestTopologyGatewayKilledMidStream streams requests through one agent to
// two gateways and kills one (SIGKILL) in the middle, taking it out of DNS
// as Kubernetes takes a dead pod out of a headless Service. The agent's
// load_balancing exporter must route what that gateway would have had to the
// other one: every request sent after the kill arrives. What the killed
// gateway had already accepted but not yet exported is lost with it (its
// batch and queue are in memory); docs/deployment.md says so. Those can only
// be requests sent shortly before the kill (3 s is allowed; requests sent 5 s
// earlier must all arrive).
func TestTopologyGatewayKilledMidStream(t *testing.T) {
	hosts := filepath.Join(t.TempDir(), "hosts")
	writeHosts(t, hosts, "127.0.0.2", "127.0.0.3")
	wrapper := hostsAgentWrapper(t, hosts)

	ports := e2etest.NewPorts(t)
	sink := e2etest.NewSink(t)
	gwPort := ports.Port("gateway_grpc")
	gw1 := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env: gatewayEnv(t, ports, "gw1", "127.0.0.2", gwPort, sink.Endpoint)})
	gw2 := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env: gatewayEnv(t, ports, "gw2", "127.0.0.3", gwPort, sink.Endpoint)})
	agent := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")}, Wrapper: wrapper,
		Env: agentEnv(t, ports, "agent", gatewayName, gwPort, fmt.Sprintf("127.0.0.2:%d", gwPort))})
	// The engine's own exporter: the Go SDK over OTLP/gRPC, one export per
	// request, each required accepted.
	engine := e2etest.NewSDKTracer(t, e2etest.SDKOptions{Endpoint: ports.Addr("agent_grpc"),
		Resource: e2etest.EngineResource("vllm", "vllm-0")})

	const total, killAt = 400, 250
	sent := make([]time.Time, total)
	ids := make([]pcommon.TraceID, total)
	var killed time.Time
	ticker := time.NewTicker(20 * time.Millisecond) // 50 requests/s, 8 s in all
	defer ticker.Stop()
	for i := range total {
		<-ticker.C
		if i == killAt {
			gw2.Kill()
			writeHosts(t, hosts, "127.0.0.2")
			killed = time.Now()
		}
		sc := engine.Send(t.Context(), "vllm.llm_engine", failoverRequest(i, time.Now()))
		ids[i], sent[i] = pcommon.TraceID(sc.TraceID()), time.Now()
		require.NoError(t, engine.FlushErr(t.Context()), "the agent refused request %d", i)
	}

	arrived := func() map[pcommon.TraceID]bool {
		got := map[pcommon.TraceID]bool{}
		for _, td := range sink.Traces.AllTraces() {
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						if s.Name() == "llm_request" {
							got[s.TraceID()] = true
						}
					}
				}
			}
		}
		return got
	}
	// The DNS view is re-read every 5 s (resolver interval; Go's hosts cache
	// is as long), and a refused batch is retried every 1-5 s: allow a minute.
	require.Eventually(t, func() bool {
		got := arrived()
		for i := killAt; i < total; i++ {
			if !got[ids[i]] {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "every request sent after the kill reaches the sink through the other gateway")
	agent.Stop()
	gw1.Stop()

	got := arrived()
	lost := 0
	for i := range killAt {
		if got[ids[i]] {
			continue
		}
		lost++
		// Only what the dead gateway held: its batch (200 ms) and its
		// exporter's in-flight queue.
		assert.WithinDuration(t, killed, sent[i], 3*time.Second, "request %d sent %s before the kill was lost", i, killed.Sub(sent[i]))
	}
	t.Logf("%d of %d requests arrived; %d sent before the kill were lost with the killed gateway", len(got), total, lost)
	assert.Greater(t, len(got), killAt, "traffic went through both gateways and on after the kill")
}
