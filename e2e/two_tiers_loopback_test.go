// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestTwoTiersOnLoopbackWithoutBackend runs the shipped agent and gateway
// on loopback, off Kubernetes (docs/deployment.md, "Off Kubernetes"): the
// agent with INFERPROF_K8S_PASSTHROUGH=true, the gateway with no trace
// backend (INFERPROF_EXPORTER=nop, and a backend address where nothing
// listens, which it must not try). Requests sent to the agent are counted
// on the gateway's Prometheus endpoint, and the gateway warns about no
// failed export. Before INFERPROF_EXPORTER, such a gateway retried and
// warned every few seconds with no way to turn it off.
func TestTwoTiersOnLoopbackWithoutBackend(t *testing.T) {
	ports := e2etest.NewPorts(t)
	gwPort := ports.Port("gateway_grpc")
	gw := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env: append(gatewayEnv(t, ports, "gateway", "127.0.0.1", gwPort, ports.Addr("nothing_listens")),
			"INFERPROF_EXPORTER=nop", "INFERPROF_METRICS_FLUSH_INTERVAL=200ms"),
	})
	agent := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")},
		Env: agentEnv(t, ports, "agent", "127.0.0.1", gwPort, ports.Addr("gateway_grpc"))})

	tr := e2etest.NewTracer(t, ports.Addr("agent_grpc"), attribute.String("service.name", "vllm"))
	start := time.Now().Add(-5 * time.Second)
	for i := range 20 {
		tr.Send(t.Context(), "vllm.llm_engine", vllmRequestTTFT(start, i, 0.1))
	}
	tr.Flush(t)
	require.Eventually(t, func() bool { return promRequests(ports.Addr("gateway_prometheus")) == 20 },
		90*time.Second, 100*time.Millisecond, "the gateway never counted the agent's 20 requests")
	agent.Stop()
	gw.Stop()
	out := gw.Output()
	for _, bad := range []string{"Exporting failed", "connection refused", ports.Addr("nothing_listens")} {
		assert.Falsef(t, strings.Contains(out, bad), "the gateway tried the backend (%q):\n%s", bad, out)
	}
}
