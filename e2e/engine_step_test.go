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
	"slices"
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

// batch is one batch the fake engine ran, from its own bookkeeping
// (integrations/python/tests/fakes/drive.py).
type batch struct {
	EngineIndex     int64    `json:"engine_index"`
	RequestIDs      []string `json:"request_ids"`
	RequestTokens   []int64  `json:"request_tokens"`
	Prefill         int64    `json:"prefill"`
	Decode          int64    `json:"decode"`
	ScheduledTokens int64    `json:"scheduled_tokens"`
	Preempted       []string `json:"preempted"`
	Resumed         []string `json:"resumed"`
}

// driveOutput is what drive.py prints: the batches the hook must report,
// in order per engine index, and the hook's counts.
type driveOutput struct {
	Steps   []batch `json:"steps"`
	Batches int     `json:"batches"`
	Stats   struct {
		Sent    int `json:"sent"`
		Dropped int `json:"dropped"`
	} `json:"stats"`
	PID int64 `json:"pid"`
}

// runFakeEngine drives the real Python hook, loaded through its
// sitecustomize as inferprof-run loads it, on a fake engine (drive.py
// arguments in args), sending to sock.
func runFakeEngine(t *testing.T, sock, service string, args ...string) driveOutput {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	py := filepath.Join(e2etest.RepoRoot(), "integrations", "python")
	cmd := exec.Command("python3", append([]string{filepath.Join(py, "tests", "fakes", "drive.py")}, args...)...)
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+filepath.Join(py, "bootstrap")+string(os.PathListSeparator)+filepath.Join(py, "tests", "fakes"),
		"INFERPROF_STEP_ENDPOINT="+sock,
		"OTEL_SERVICE_NAME="+service)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	var out driveOutput
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.NotEmpty(t, out.Steps)
	require.Equal(t, len(out.Steps), out.Stats.Sent, "hook stats %+v; stderr %s", out.Stats, stderr.String())
	return out
}

type stepSpan struct {
	res  pcommon.Resource
	span ptrace.Span
}

func (s stepSpan) attr(k string) pcommon.Value {
	v, _ := s.span.Attributes().Get(k)
	return v
}

// stepSpans returns the engine.step spans in the sink per engine index,
// in step order.
func stepSpans(sink *e2etest.Sink) map[int64][]stepSpan {
	out := map[int64][]stepSpan{}
	for _, td := range sink.Traces.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			idx, _ := rs.Resource().Attributes().Get(names.ResourceEngineIndex)
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if sp.Name() == names.SpanEngineStep {
						out[idx.Int()] = append(out[idx.Int()], stepSpan{rs.Resource(), sp})
					}
				}
			}
		}
	}
	for _, steps := range out {
		sort.Slice(steps, func(i, j int) bool {
			return steps[i].attr(names.AttrStepIndex).Int() < steps[j].attr(names.AttrStepIndex).Int()
		})
	}
	return out
}

func strs(v pcommon.Value) []string {
	out := []string{}
	for _, x := range v.Slice().All() {
		out = append(out, x.Str())
	}
	return out
}

func ints(v pcommon.Value) []int64 {
	out := []int64{}
	for _, x := range v.Slice().All() {
		out = append(out, x.Int())
	}
	return out
}

func sorted(v []string) []string {
	v = slices.Clone(v)
	slices.Sort(v)
	if v == nil {
		return []string{}
	}
	return v
}

// TestEngineStepSpansDescribeOneBatchEach runs the real Python hook on fake
// engines that follow vLLM's and SGLang's call structure, through the built
// collector, and checks that every engine.step span's request ids and
// tokens, prefill and decode counts, scheduled tokens, preemptions and
// resumptions belong to one and the same batch of the engine: vLLM's
// batch queue returns batch N while it schedules N+1, and SGLang's overlap
// loop processes a copy of batch N-1 after it launched N.
func TestEngineStepSpansDescribeOneBatchEach(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, engine string
		args         []string
		engines      int // engine indexes that report
	}{
		{"vllm async scheduling", "vllm", []string{"--engine", "vllm", "--step-ms", "3"}, 1},
		{"vllm sync with drafts", "vllm", []string{"--engine", "vllm", "--sync", "--step-ms", "3"}, 1},
		{"sglang overlap, TP 4, DP attention 2", "sglang",
			[]string{"--engine", "sglang", "--tp", "4", "--dp", "2", "--dp-attention", "--step-ms", "3"}, 2},
		{"sglang normal loop", "sglang", []string{"--engine", "sglang", "--normal", "--step-ms", "3"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := e2etest.NewSink(t)
			sock := filepath.Join(socketDir(t), "step.sock")
			c := e2etest.Start(t, e2etest.Options{Config: e2etest.Render(t, e2etest.NewPorts(t), t.TempDir(), fmt.Sprintf(`
receivers:
  engine_step:
    endpoint: %s
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
      receivers: [engine_step]
      exporters: [otlp_grpc]
`, sock, sink.Endpoint))})

			service := "e2e-" + tc.engine
			out := runFakeEngine(t, sock, service, tc.args...)
			require.Eventually(t, func() bool { return sink.Traces.SpanCount() >= len(out.Steps) },
				30*time.Second, 20*time.Millisecond, "got %d engine.step spans\n%s", sink.Traces.SpanCount(), c.Output())
			got := stepSpans(sink)
			require.Len(t, got, tc.engines, "one engine per reporting rank group")

			want := map[int64][]batch{}
			for _, b := range out.Steps {
				want[b.EngineIndex] = append(want[b.EngineIndex], b)
			}
			var preempted, resumed int
			for idx, steps := range got {
				require.Len(t, steps, len(want[idx]), "engine %d", idx)
				var lastEnd pcommon.Timestamp
				for i, s := range steps {
					w := want[idx][i]
					at := fmt.Sprintf("engine %d step %d", idx, i+1)
					assert.Equal(t, int64(i+1), s.attr(names.AttrStepIndex).Int(), at)
					assert.Equal(t, w.RequestIDs, strs(s.attr(names.AttrStepRequestIDs)), at)
					assert.Equal(t, w.RequestTokens, ints(s.attr(names.AttrStepRequestTokens)), at)
					assert.Equal(t, w.Prefill, s.attr(names.AttrStepPrefillReqs).Int(), at)
					assert.Equal(t, w.Decode, s.attr(names.AttrStepDecodeReqs).Int(), at)
					assert.Equal(t, w.ScheduledTokens, s.attr(names.AttrStepScheduledToks).Int(), at)
					assert.Equal(t, sorted(w.Preempted), sorted(strs(s.attr(names.AttrStepPreempted))), at)
					assert.Equal(t, sorted(w.Resumed), sorted(strs(s.attr(names.AttrStepResumed))), at)
					_, degraded := s.span.Attributes().Get(names.AttrStepDegraded)
					assert.False(t, degraded, at)
					assert.GreaterOrEqual(t, s.span.StartTimestamp(), lastEnd, "%s: steps of one engine do not overlap", at)
					assert.Less(t, s.span.StartTimestamp(), s.span.EndTimestamp(), at)
					lastEnd = s.span.EndTimestamp()
					preempted += len(w.Preempted)
					resumed += len(w.Resumed)
					assert.Equal(t, map[string]any{
						names.ResourceServiceName:     service,
						names.ResourceEngineName:      tc.engine,
						names.ResourceEngineVersion:   "unknown", // the fakes are not installed distributions
						names.ResourceProcessPID:      out.PID,
						names.ResourceHostName:        host,
						names.ResourceEngineIndex:     idx,
						names.ResourceServiceInstance: host + "/" + strconv.FormatInt(out.PID, 10) + "/" + strconv.FormatInt(idx, 10),
					}, s.res.Attributes().AsRaw(), at)
				}
			}
			assert.Positive(t, preempted, "the scenario preempts (SGLang: retracts)")
			assert.Positive(t, resumed, "and resumes")
		})
	}
}
