// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
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

// TestAgentOffKubernetesWithNodeName runs the shipped agent as a bare-metal
// host would: K8S_NODE_NAME set, INFERPROF_K8S_PASSTHROUGH not set, and no
// API server (KUBERNETES_SERVICE_HOST empty). It must become healthy and
// forward a request to the gateway, with no stack trace. Before the
// passthrough default was true, k8s_attributes failed to build its client
// at Start ("Could not initialize kube client", with a stack trace) and the
// collector never became ready.
func TestAgentOffKubernetesWithNodeName(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	ports := e2etest.NewPorts(t)
	gwPort := ports.Port("gateway_grpc")
	// The gateway exports to an address where nothing listens: this test is
	// about the agent (TestTwoTiersOnLoopbackWithoutBackend runs the
	// gateway with INFERPROF_EXPORTER=nop).
	gw := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env: append(gatewayEnv(t, ports, "gateway", "127.0.0.1", gwPort, ports.Addr("nothing_listens")),
			"INFERPROF_METRICS_FLUSH_INTERVAL=200ms"),
	})
	var env []string
	for _, kv := range agentEnv(t, ports, "agent", "127.0.0.1", gwPort, ports.Addr("gateway_grpc")) {
		if !strings.HasPrefix(kv, "INFERPROF_K8S_PASSTHROUGH=") {
			env = append(env, kv)
		}
	}
	require.Contains(t, env, "K8S_NODE_NAME=agent")
	agent := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")}, Env: env})

	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ports.Addr("agent_health") + "/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the agent never became healthy off Kubernetes")

	tr := e2etest.NewTracer(t, ports.Addr("agent_grpc"), attribute.String("service.name", "vllm"))
	tr.Send(t.Context(), "vllm.llm_engine", vllmRequestTTFT(time.Now().Add(-5*time.Second), 0, 0.1))
	tr.Flush(t)
	require.Eventually(t, func() bool { return promRequests(ports.Addr("gateway_prometheus")) == 1 },
		90*time.Second, 100*time.Millisecond, "the gateway never counted the agent's request")
	agent.Stop()
	gw.Stop()
	out := agent.Output()
	for _, bad := range []string{"stacktrace", "kube client", "Error"} {
		assert.Falsef(t, strings.Contains(out, bad), "the agent logged %q off Kubernetes:\n%s", bad, out)
	}
	// It says once what it cannot do (k8s_check), and nothing more about it.
	assert.Equalf(t, 1, strings.Count(out, "No Kubernetes API server"),
		"the agent should say once that it has no pod metadata:\n%s", out)
	assert.Contains(t, out, "k8s.namespace.name")
}

// TestAgentAskingForAnAPIServerOffKubernetesSaysWhy: passthrough false with
// no API server cannot work. The agent must stop with one error naming the
// variable to change, before k8s_attributes fails with a stack trace.
func TestAgentAskingForAnAPIServerOffKubernetesSaysWhy(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	ports := e2etest.NewPorts(t)
	gwPort := ports.Port("gateway_grpc")
	var env []string
	for _, kv := range agentEnv(t, ports, "agent", "127.0.0.1", gwPort, ports.Addr("gateway_grpc")) {
		if !strings.HasPrefix(kv, "INFERPROF_K8S_PASSTHROUGH=") {
			env = append(env, kv)
		}
	}
	agent := e2etest.Launch(t, e2etest.Options{ConfigFiles: []string{shippedConfig("agent.yaml")},
		Env: append(env, "INFERPROF_K8S_PASSTHROUGH=false")})
	assert.NotZero(t, agent.Wait(60*time.Second), "the agent should exit")
	require.Eventually(t, func() bool { return strings.Contains(agent.Output(), "INFERPROF_K8S_PASSTHROUGH=true") },
		10*time.Second, 20*time.Millisecond, "the agent's error should name the variable to change")
	assert.NotContains(t, agent.Output(), "kube client", "k8s_attributes should not have been started")
}
