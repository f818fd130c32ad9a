// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// stepCollector is a collector with only the engine_step receiver, its
// internal metrics on a Prometheus port.
func stepCollector(t *testing.T, ports *e2etest.Ports, sock, sinkEndpoint, pollInterval string) *e2etest.Collector {
	t.Helper()
	return e2etest.Start(t, e2etest.Options{Config: e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
receivers:
  engine_step:
    endpoint: %s
    poll_interval: %s
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
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
      receivers: [engine_step]
      exporters: [otlp_grpc]
`, sock, pollInterval, sinkEndpoint))})
}

// metric reads a collector's internal metric (0 until it exists).
func metric(t *testing.T, ports *e2etest.Ports, name string) float64 {
	t.Helper()
	v, _ := promValue(ports.Port("telemetry"), name)
	return v
}

// fakeEngine returns the command that runs drive.py with the real hook
// loaded through its sitecustomize, sending to sock.
func fakeEngine(t *testing.T, sock string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	py := filepath.Join(e2etest.RepoRoot(), "integrations", "python")
	cmd := exec.Command("python3", append([]string{filepath.Join(py, "tests", "fakes", "drive.py")}, args...)...)
	cmd.Env = append(append(os.Environ(),
		"PYTHONPATH="+filepath.Join(py, "bootstrap")+string(os.PathListSeparator)+filepath.Join(py, "tests", "fakes"),
		"INFERPROF_STEP_ENDPOINT="+sock, "OTEL_SERVICE_NAME=e2e-ring"), env...)
	return cmd
}

func stepIndexesOf(sink *e2etest.Sink) map[int64]int {
	seen := map[int64]int{}
	for _, steps := range stepSpans(sink) {
		for _, s := range steps {
			seen[s.attr(names.AttrStepIndex).Int()]++
		}
	}
	return seen
}

// TestEngineStepRingKeepsWhatACrashedEngineWrote kills a fake engine with
// SIGKILL after its 12th step while the collector reads its ring only once
// a second: the steps the hook wrote are in the ring, not in the dead
// process, and every one of them arrives, once.
func TestEngineStepRingKeepsWhatACrashedEngineWrote(t *testing.T) {
	sink := e2etest.NewSink(t)
	ports := e2etest.NewPorts(t)
	sock := filepath.Join(socketDir(t), "step.sock")
	c := stepCollector(t, ports, sock, sink.Endpoint, "1s")

	cmd := fakeEngine(t, sock, []string{"INFERPROF_TEST_KILL_AFTER=12"}, "--engine", "vllm", "--step-ms", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	require.Error(t, err)
	status := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL, "%v: %s", err, stderr.String())

	require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= 12 }, 30*time.Second, 20*time.Millisecond,
		"engine.step spans\n%s", c.Output())
	want := map[int64]int{}
	for i := int64(1); i <= 12; i++ {
		want[i] = 1
	}
	assert.Equal(t, want, stepIndexesOf(sink))
	assert.Equal(t, 12.0, metric(t, ports, "otelcol_receiver_engine_step_ring_records"), "read from the ring")
	require.Eventually(t, func() bool { return metric(t, ports, "otelcol_receiver_engine_step_rings") == 0 },
		30*time.Second, 50*time.Millisecond, "the dead engine's ring is let go")
}

// TestEngineStepRingAcrossACollectorRestart stops the collector while a
// fake engine runs and starts another on the same socket: the hook keeps
// writing to its ring meanwhile, announces it again when the reader's beat
// stands still, and the new collector reads on from where the old one
// stopped. Every step arrives exactly once.
func TestEngineStepRingAcrossACollectorRestart(t *testing.T) {
	sink := e2etest.NewSink(t)
	sock := filepath.Join(socketDir(t), "step.sock")
	ports1 := e2etest.NewPorts(t)
	c1 := stepCollector(t, ports1, sock, sink.Endpoint, "2ms")

	cmd := fakeEngine(t, sock, nil, "--engine", "vllm", "--step-ms", "30", "--tokens", "40", "--kv-tokens", "2000")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= 20 }, 30*time.Second, 5*time.Millisecond,
		"steps reach the first collector\n%s", c1.Output())
	c1.Stop()
	before := sink.Traces.SpanCount()
	ports2 := e2etest.NewPorts(t)
	c2 := stepCollector(t, ports2, sock, sink.Endpoint, "2ms")

	select {
	case err := <-done:
		require.NoError(t, err, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the fake engine did not finish")
	}
	var out driveOutput
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.Equal(t, len(out.Steps), out.Stats.Sent, "every step went into the ring: %+v", out.Stats)
	require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= len(out.Steps) }, 30*time.Second,
		20*time.Millisecond, "steps after the restart\n%s", c2.Output())
	seen := stepIndexesOf(sink)
	for i := 1; i <= len(out.Steps); i++ {
		assert.Equal(t, 1, seen[int64(i)], "step %d", i)
	}
	assert.Len(t, seen, len(out.Steps))
	assert.Less(t, before, len(out.Steps), "the engine ran on after the first collector stopped")
	assert.Equal(t, float64(len(out.Steps)-before), metric(t, ports2, "otelcol_receiver_engine_step_ring_records"),
		"the second collector read the rest from the same ring")
	assert.Zero(t, metric(t, ports2, "otelcol_receiver_engine_step_bad_datagrams"))
}
