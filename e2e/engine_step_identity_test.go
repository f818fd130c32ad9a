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
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// replicaRun is what drive.py prints, with the instance id its hook read.
type replicaRun struct {
	driveOutput
	InstanceID string `json:"instance_id"`
}

// launcher returns the built inferprof-run, next to the collector that make
// build made, or builds it.
func launcher(t *testing.T) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(e2etest.Binary(t)), "inferprof-run")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	p = filepath.Join(t.TempDir(), "inferprof-run")
	out, err := exec.Command("go", "build", "-o", p, filepath.Join(e2etest.RepoRoot(), "cmd", "inferprof-run")).CombinedOutput()
	require.NoError(t, err, string(out))
	return p
}

// runReplica runs the fake vLLM engine through inferprof-run, as
// `inferprof-run vllm serve` would start a server: the launcher gives it a
// service.instance.id, which the hook reads.
func runReplica(t *testing.T, bin, sock, service string, args ...string) (replicaRun, error) {
	py := filepath.Join(e2etest.RepoRoot(), "integrations", "python")
	cmd := exec.Command(bin, append([]string{"-no-cupti", "-no-engine-metrics", "-hook-dir", filepath.Join(py, "bootstrap"),
		"-step-endpoint", sock, "-service-name", service, "--",
		"python3", filepath.Join(py, "tests", "fakes", "drive.py")}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(py, "tests", "fakes"), "OTEL_RESOURCE_ATTRIBUTES=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var out replicaRun
	if err := cmd.Run(); err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return out, fmt.Errorf("%w: %s", err, stdout.String())
	}
	return out, nil
}

// TestTwoReplicasWithOneServiceNameKeepTheirOwnITL runs two fake vLLM
// servers at once through the built inferprof-run, with the same
// service.name and the same request ids (a client that numbers its
// requests), stepping at different paces. Each replica's request spans carry
// the service.instance.id its launcher chose, as the engine's SDK would send
// them; each must come out with the gaps of its own replica's steps.
func TestTwoReplicasWithOneServiceNameKeepTheirOwnITL(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	const service = "e2e-replicas"
	bin := launcher(t)
	sink := e2etest.NewSink(t)
	sock := filepath.Join(socketDir(t), "step.sock")
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{Config: e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
receivers:
  engine_step:
    endpoint: %s
  otlp:
    protocols:
      grpc:
        endpoint: {{addr "otlp"}}
processors:
  privacy: {}
  step_figures: {}
  inference:
    phase_spans: false
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp, engine_step]
      processors: [privacy, step_figures, inference]
      exporters: [otlp_grpc]
`, sock, sink.Endpoint))})

	start := time.Now()
	paces := []string{"4", "12"}
	runs := make([]replicaRun, len(paces))
	errs := make([]error, len(paces))
	var wg sync.WaitGroup
	for i, pace := range paces {
		wg.Go(func() { runs[i], errs[i] = runReplica(t, bin, sock, service, "--engine", "vllm", "--step-ms", pace) })
	}
	wg.Wait()
	end := time.Now()
	for i := range runs {
		require.NoError(t, errs[i])
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, runs[i].InstanceID)
	}
	require.NotEqual(t, runs[0].InstanceID, runs[1].InstanceID, "each launch is its own instance")
	total := len(runs[0].Steps) + len(runs[1].Steps)
	require.Eventually(t, func() bool { return len(spansNamed(sink, names.SpanEngineStep)) == total },
		30*time.Second, 20*time.Millisecond, "engine.step spans\n%s", c.Output())

	// Each replica's token times, from its own engine.step spans.
	type tok struct {
		index int64
		end   int64
	}
	times := map[string]map[string][]tok{} // instance -> request id -> token steps
	for _, s := range spansNamed(sink, names.SpanEngineStep) {
		inst, _ := s.res.Attributes().Get(names.ResourceServiceInstance)
		svc, _ := s.res.Attributes().Get(names.ResourceServiceName)
		require.Equal(t, service, svc.Str())
		if times[inst.Str()] == nil {
			times[inst.Str()] = map[string][]tok{}
		}
		ids, toks := strs(s.attr(names.AttrStepRequestIDs)), ints(s.attr(names.AttrStepRequestTokens))
		for i, id := range ids {
			if toks[i] > 0 {
				times[inst.Str()][id] = append(times[inst.Str()][id], tok{s.attr(names.AttrStepIndex).Int(), int64(s.span.EndTimestamp())})
			}
		}
	}
	require.Len(t, times, 2, "steps carry their replica's service.instance.id")
	common := 0
	for id := range times[runs[0].InstanceID] {
		if _, ok := times[runs[1].InstanceID][id]; ok {
			common++
		}
	}
	require.Positive(t, common, "the replicas serve requests with the same ids")

	wantGaps := map[string]map[string][]float64{}
	for _, r := range runs {
		wantGaps[r.InstanceID] = map[string][]float64{}
		tracer := e2etest.NewTracer(t, ports.Addr("otlp"), attribute.String("service.name", service),
			attribute.String("service.instance.id", r.InstanceID))
		for id, ts := range times[r.InstanceID] {
			sort.Slice(ts, func(i, j int) bool { return ts[i].index < ts[j].index })
			var gaps []float64
			for i := 1; i < len(ts); i++ {
				gaps = append(gaps, float64(ts[i].end-ts[i-1].end)/1e9)
			}
			wantGaps[r.InstanceID][id] = gaps
			tracer.Send(t.Context(), "vllm.llm_engine", e2etest.SpanSpec{
				Name: "llm_request", Kind: trace.SpanKindServer, Start: start, End: end,
				Attributes: []attribute.KeyValue{
					attribute.String("gen_ai.request.id", id),
					attribute.String("gen_ai.response.model", "fake-model"),
					attribute.Int("gen_ai.usage.prompt_tokens", 16),
					attribute.Int("gen_ai.usage.completion_tokens", len(ts)),
					attribute.Float64("gen_ai.latency.e2e", end.Sub(start).Seconds()),
					attribute.Float64("gen_ai.latency.time_to_first_token", float64(ts[0].end-start.UnixNano())/1e9),
					attribute.Float64("gen_ai.latency.time_in_queue", 0.001),
					attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.01),
					attribute.Float64("gen_ai.latency.time_in_model_decode", float64(ts[len(ts)-1].end-ts[0].end)/1e9),
				},
			})
		}
		tracer.Flush(t)
	}
	want := len(wantGaps[runs[0].InstanceID]) + len(wantGaps[runs[1].InstanceID])
	require.Eventually(t, func() bool { return len(spansNamed(sink, "llm_request")) == want },
		30*time.Second, 20*time.Millisecond)

	checked := 0
	for _, s := range spansNamed(sink, "llm_request") {
		inst, _ := s.res.Attributes().Get(names.ResourceServiceInstance)
		id := s.attr("gen_ai.request.id").Str()
		at := fmt.Sprintf("replica %s request %s", inst.Str(), id)
		_, missing := s.span.Attributes().Get(names.AttrStepsMissing)
		assert.False(t, missing, at)
		w := wantGaps[inst.Str()][id]
		steps, ok := s.span.Attributes().Get(names.AttrDecodeSteps)
		require.True(t, ok, at)
		assert.Equal(t, int64(len(w)), steps.Int(), at)
		if len(w) == 0 {
			continue
		}
		gv, ok := s.span.Attributes().Get(names.AttrITLGaps)
		require.True(t, ok, at)
		got := make([]float64, gv.Slice().Len())
		for i := range got {
			got[i] = gv.Slice().At(i).Double()
		}
		assert.InDeltaSlice(t, w, got, 1e-9, at)
		checked++
	}
	assert.Greater(t, checked, common, "requests of both replicas were checked")
}

// spansNamed returns the spans called name in the sink, with their resources.
func spansNamed(sink *e2etest.Sink, name string) []stepSpan {
	var out []stepSpan
	for _, td := range sink.Traces.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if sp.Name() == name {
						out = append(out, stepSpan{rs.Resource(), sp})
					}
				}
			}
		}
	}
	return out
}
