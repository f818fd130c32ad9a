// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestScaleTiers measures the two tiers of config/agent.yaml and
// config/gateway.yaml, as shipped, for the scaling maths in
// docs/deployment.md (`make scale`; skipped unless SCALE_DURATION is set).
// Each phase runs a fixed load for SCALE_DURATION on loopback and reads the
// CPU time each process used, so a figure is work per CPU-second, not a
// rate that depends on how loaded the machine was:
//
//   - spans: vLLM request spans over OTLP/HTTP into the agent, through
//     load_balancing to the gateway (agent and gateway CPU);
//   - kernels: CUPTI kernel records into the agent's socket (agent CPU).
//
// The join window's memory per record is a heap measurement, not a process
// one: BenchmarkStageRecordBytes in the inference processor's join package.
//
// It asserts only that the load was taken, never a rate.
func TestScaleTiers(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SCALE_DURATION"))
	if err != nil || d <= 0 {
		t.Skip("set SCALE_DURATION (make scale) to measure the agent and gateway tiers")
	}
	root := e2etest.RepoRoot()
	ports := e2etest.NewPorts(t)
	sink := e2etest.NewSink(t)
	sockDir, err := os.MkdirTemp("", "scale")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })

	gwEnv := []string{
		"INFERPROF_OTLP_GRPC_ENDPOINT=" + ports.Addr("gw_grpc"),
		"INFERPROF_HEALTH_ENDPOINT=" + ports.Addr("gw_health"),
		"INFERPROF_PROMETHEUS_ENDPOINT=" + ports.Addr("gw_prom"),
		fmt.Sprintf("INFERPROF_TELEMETRY_PORT=%d", ports.Port("gw_tel")),
		"INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT=" + ports.Addr("gw_gs"),
		"INFERPROF_UI_ENDPOINT=" + ports.Addr("gw_ui"),
		"INFERPROF_DATA_DIR=" + t.TempDir(),
		"INFERPROF_EXPORT_OTLP_ENDPOINT=" + sink.Endpoint,
		"INFERPROF_EXPORT_OTLP_INSECURE=true",
		"GRAPHSIGNAL_API_KEY=",
	}
	gw := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{filepath.Join(root, "config", "gateway.yaml")}, Env: gwEnv})
	agent := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{filepath.Join(root, "config", "agent.yaml")}, Env: []string{
		"INFERPROF_OTLP_GRPC_ENDPOINT=" + ports.Addr("agent_grpc"),
		"INFERPROF_OTLP_HTTP_ENDPOINT=" + ports.Addr("agent_http"),
		"INFERPROF_HEALTH_ENDPOINT=" + ports.Addr("agent_health"),
		fmt.Sprintf("INFERPROF_TELEMETRY_PORT=%d", ports.Port("agent_tel")),
		"INFERPROF_STEP_ENDPOINT=" + filepath.Join(sockDir, "step.sock"),
		"INFERPROF_CUPTI_ENDPOINT=" + filepath.Join(sockDir, "cupti.sock"),
		"INFERPROF_GATEWAY_HOSTNAME=127.0.0.1",
		fmt.Sprintf("INFERPROF_GATEWAY_PORT=%d", ports.Port("gw_grpc")),
		"INFERPROF_GATEWAY_ENDPOINT=" + ports.Addr("gw_grpc"),
		"INFERPROF_K8S_PASSTHROUGH=true",
		"K8S_NODE_NAME=scale",
	}})
	ap, gp := newProc(agent.PID()), newProc(gw.PID())
	defer ap.close()
	defer gp.close()
	report := []string{fmt.Sprintf("Run: SCALE_DURATION=%s, shipped config/agent.yaml and config/gateway.yaml, %d CPUs, loopback.", d, numCPU())}

	// Spans.
	const spanRate, per = 10000.0, 500
	s := &spanSender{url: "http://" + ports.Addr("agent_http") + "/v1/traces", batches: spanBatches(64, per), per: per}
	a0, g0 := ap.cpuSeconds(), gp.cpuSeconds()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	require.NoError(t, s.run(ctx, spanRate, 4))
	cancel()
	spans := s.accepted.Load()
	require.Eventually(t, func() bool { return int64(sink.Traces.SpanCount()) >= spans }, 2*time.Minute, 100*time.Millisecond,
		"every accepted span reaches the backend through the gateway")
	aCPU, gCPU := ap.cpuSeconds()-a0, gp.cpuSeconds()-g0
	report = append(report, fmt.Sprintf("| spans | %d vLLM request spans in %s (%.0f/s) | agent %.1f CPU-s: **%.0f spans/s per core** | gateway %.1f CPU-s: **%.0f spans/s per core** |",
		spans, d, float64(spans)/d.Seconds(), aCPU, float64(spans)/aCPU, gCPU, float64(spans)/gCPU))

	// Kernel records.
	c := &cuptiClients{sock: filepath.Join(sockDir, "cupti.sock")}
	a0 = ap.cpuSeconds()
	ctx, cancel = context.WithTimeout(t.Context(), d)
	require.NoError(t, c.run(ctx, 2, 500000))
	cancel()
	recs := c.records.Load()
	require.Positive(t, recs)
	aCPU = ap.cpuSeconds() - a0
	report = append(report, fmt.Sprintf("| kernels | %d CUPTI kernel records in %s (%.0f/s) | agent %.1f CPU-s: **%.0f records/s per core** | |",
		recs, d, float64(recs)/d.Seconds(), aCPU, float64(recs)/aCPU))

	agent.Stop()
	gw.Stop()
	out := strings.Join(report, "\n")
	t.Log("\n" + out)
	if path := os.Getenv("SCALE_REPORT"); path != "" {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(out+"\n"), 0o644))
	}
}
