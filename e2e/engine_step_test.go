package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// driveOutput is what integrations/python/tests/fakes/drive.py prints.
type driveOutput struct {
	Steps []struct {
		RequestIDs    []string `json:"request_ids"`
		RequestTokens []int64  `json:"request_tokens"`
	} `json:"steps"`
	Stats struct {
		Sent    int `json:"sent"`
		Dropped int `json:"dropped"`
	} `json:"stats"`
	PID int64 `json:"pid"`
}

// TestEngineStepFromPythonHook runs the real Python hook, loaded through its
// sitecustomize as inferprof-run loads it, on a fake vLLM engine loop for N
// steps, and checks that the collector's engine_step receiver turns every
// step into one engine.step span with the batch the engine really ran.
func TestEngineStepFromPythonHook(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	const steps = 25
	sink := e2etest.NewSink(t)
	// A short folder: t.TempDir paths can pass the 107-byte socket limit.
	sockDir, err := os.MkdirTemp("", "es")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "step.sock")
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
receivers:
  engine_step:
    endpoint: %s
exporters:
  otlp:
    endpoint: %s
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [engine_step]
      exporters: [otlp]
`, sock, sink.Endpoint))
	c := e2etest.Start(t, e2etest.Options{Config: cfg})

	root := e2etest.RepoRoot()
	py := filepath.Join(root, "integrations", "python")
	cmd := exec.Command("python3", filepath.Join(py, "tests", "fakes", "drive.py"),
		"--engine", "vllm", "--steps", strconv.Itoa(steps), "--step-ms", "20")
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+filepath.Join(py, "bootstrap")+string(os.PathListSeparator)+filepath.Join(py, "tests", "fakes"),
		"INFERPROF_STEP_ENDPOINT="+sock,
		"OTEL_SERVICE_NAME=e2e-vllm")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	var out driveOutput
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.Len(t, out.Steps, steps)
	require.Equal(t, steps, out.Stats.Sent, "hook stats %+v; stderr %s", out.Stats, stderr.String())

	require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= steps }, 30*time.Second, 20*time.Millisecond,
		"got %d engine.step spans\n%s", sink.Traces.SpanCount(), c.Output())
	host, err := os.Hostname()
	require.NoError(t, err)

	type got struct {
		res  pcommon.Resource
		span ptrace.Span
	}
	var all []got
	for _, td := range sink.Traces.AllTraces() {
		for i := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(i)
			for j := range rs.ScopeSpans().Len() {
				sps := rs.ScopeSpans().At(j).Spans()
				for k := range sps.Len() {
					all = append(all, got{rs.Resource(), sps.At(k)})
				}
			}
		}
	}
	require.Len(t, all, steps)
	idx := func(s ptrace.Span) int64 { v, _ := s.Attributes().Get(names.AttrStepIndex); return v.Int() }
	sort.Slice(all, func(i, j int) bool { return idx(all[i].span) < idx(all[j].span) })

	preempted := 0
	var lastEnd pcommon.Timestamp
	for i, g := range all {
		sp := g.span
		assert.Equal(t, names.SpanEngineStep, sp.Name())
		assert.Equal(t, int64(i+1), idx(sp))
		assert.Equal(t, map[string]any{
			names.ResourceServiceName:     "e2e-vllm",
			names.ResourceEngineName:      "vllm",
			names.ResourceEngineVersion:   "unknown", // the fake is not an installed distribution
			names.ResourceProcessPID:      out.PID,
			names.ResourceHostName:        host,
			names.ResourceEngineIndex:     int64(0),
			names.ResourceServiceInstance: host + "/" + strconv.FormatInt(out.PID, 10) + "/0",
		}, g.res.Attributes().AsRaw())
		a := sp.Attributes().AsRaw()
		want := out.Steps[i]
		assert.Equal(t, toAny(want.RequestIDs), a[names.AttrStepRequestIDs], "step %d", i+1)
		assert.Equal(t, toAnyInt(want.RequestTokens), a[names.AttrStepRequestTokens], "step %d", i+1)
		for _, k := range []string{names.AttrStepPrefillReqs, names.AttrStepDecodeReqs, names.AttrStepScheduledToks,
			names.AttrStepRunningReqs, names.AttrStepWaitingReqs, names.AttrStepKVCacheUsage} {
			assert.Contains(t, a, k)
		}
		preempted += len(a[names.AttrStepPreempted].([]any))
		// Steps are 20 ms of (fake) model time, back to back.
		assert.GreaterOrEqual(t, sp.EndTimestamp().AsTime().Sub(sp.StartTimestamp().AsTime()), 20*time.Millisecond)
		assert.GreaterOrEqual(t, sp.StartTimestamp(), lastEnd)
		lastEnd = sp.EndTimestamp()
	}
	assert.Equal(t, 1, preempted, "the fake preempts one request once")
	first := all[0].span.Attributes().AsRaw()
	assert.Equal(t, int64(4), first[names.AttrStepPrefillReqs], "four requests admitted in the first step")
	assert.Equal(t, int64(0), first[names.AttrStepDecodeReqs])
}

func toAny[T any](v []T) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

func toAnyInt(v []int64) []any { return toAny(v) }
