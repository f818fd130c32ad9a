package e2e

import (
	"fmt"
	"os"
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
	const steps = 25
	sink := e2etest.NewSink(t)
	sock := filepath.Join(socketDir(t), "step.sock")
	ports := e2etest.NewPorts(t)
	cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
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
`, sock, sink.Endpoint))
	c := e2etest.Start(t, e2etest.Options{Config: cfg})

	out := runFakeEngine(t, sock, "e2e-vllm", steps, 20)
	require.Len(t, out.Steps, steps)

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
