// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// cpuTrace is a trace recorded fresh by torch.profiler on CPU (see
// testdata/kineto-cpu/README.md): ProfilerStep annotations, CPU ops on two
// threads, no GPU activity.
var cpuTrace = filepath.Join("testdata", "kineto-cpu", "torch-2.13.0-cpu-mlp.pt.trace.json.gz")

type cpuStep struct {
	index      uint64
	tid        int64
	start, end uint64        // Unix ns
	ops        map[int64]int // cpu_op events inside the step, by thread
}

// directCPUSteps reads the file with encoding/json: its event count, its
// ProfilerStep#N annotations (Unix ns: baseTimeNanoseconds plus ts) and the
// cpu_op events of each thread inside each.
func directCPUSteps(t *testing.T, path string) (events int, steps []cpuStep, threads map[int64]bool) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	dec := json.NewDecoder(zr)
	dec.UseNumber()
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
		Base        json.Number  `json:"baseTimeNanoseconds"`
	}
	require.NoError(t, dec.Decode(&doc))
	base, err := strconv.ParseUint(string(doc.Base), 10, 64)
	require.NoError(t, err)
	tidOf := func(e traceEvent) int64 {
		v, err := strconv.ParseInt(string(e.Tid), 10, 64)
		require.NoError(t, err)
		return v
	}
	for _, e := range doc.TraceEvents {
		if n, ok := strings.CutPrefix(e.Name, "ProfilerStep#"); ok && e.Cat == "user_annotation" && e.Ph == "X" {
			i, err := strconv.ParseUint(n, 10, 64)
			require.NoError(t, err)
			s := base + usToNS(t, e.Ts)
			steps = append(steps, cpuStep{index: i, tid: tidOf(e), start: s, end: s + usToNS(t, e.Dur), ops: map[int64]int{}})
		}
	}
	threads = map[int64]bool{}
	for _, e := range doc.TraceEvents {
		if e.Cat != "cpu_op" || e.Ph != "X" {
			continue
		}
		threads[tidOf(e)] = true
		ts := base + usToNS(t, e.Ts)
		for i := range steps {
			if steps[i].start <= ts && ts <= steps[i].end {
				steps[i].ops[tidOf(e)]++
			}
		}
	}
	return len(doc.TraceEvents), steps, threads
}

// A CPU-only torch.profiler trace: the reader reads every event, and each
// ProfilerStep#N becomes a step with exactly the file's index, thread and
// time range, marked no_launches (the receiver reads GPU activity and CUDA
// launches, and a CPU trace has none), with no GPU record and no kernel
// figure.
func TestKinetoStepsFromCPUTorchTrace(t *testing.T) {
	t.Parallel()
	events, want, threads := directCPUSteps(t, cpuTrace)
	require.Len(t, want, 3, "the generator records ProfilerStep#2..#4")
	require.GreaterOrEqual(t, len(threads), 2, "CPU ops of several threads")
	for _, w := range want {
		total := 0
		for _, n := range w.ops {
			total += n
		}
		t.Logf("ProfilerStep#%d: %.3f ms, %d CPU ops on %d threads (not read by the receiver)", w.index, float64(w.end-w.start)/1e6, total, len(w.ops))
	}
	mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 30, mb, 0)
	lim := kineto.DefaultLimits
	lim.StepEvents = kineto.DefaultStepEvents
	sum, err := readTraceFile(agg, cpuTrace, lim)
	require.NoError(t, err)
	assert.Equal(t, uint64(events), sum.Events, "every trace event read")
	assert.Zero(t, sum.Records, "no GPU record in a CPU trace")
	assert.Empty(t, sum.Busy)
	require.Len(t, sum.Steps, len(want))
	for i, w := range want {
		got := sum.Steps[i]
		assert.Equal(t, w.index, got.Index)
		assert.Equal(t, w.tid, got.TID)
		assert.Equal(t, w.start, got.Start, "step %d", w.index)
		assert.Equal(t, w.end, got.End, "step %d", w.index)
		assert.Equal(t, "no_launches", string(got.Result.Missing), "step %d", w.index)
		assert.Zero(t, got.Result.Figures.KernelCount)
	}
}

// Dropped into the Kineto folder of a running receiver, the CPU trace's
// steps come out as engine.step spans with the file's times, each saying
// why it has no GPU figures.
func TestKinetoCPUTraceFromDirectory(t *testing.T) {
	t.Parallel()
	_, want, _ := directCPUSteps(t, cpuTrace)
	data, err := os.ReadFile(cpuTrace)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpu.pt.trace.json.gz"), data, 0o600))
	spans := new(consumertest.TracesSink)
	h := startWithSpans(t, func(c *Config) { c.Endpoint = ""; c.Kineto.Directory = dir }, spans)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_step_spans") == int64(len(want)) }, 10*time.Second, 5*time.Millisecond)
	byIndex := map[int64]cpuStep{}
	for _, w := range want {
		byIndex[int64(w.index)] = w
	}
	seen := 0
	for _, td := range spans.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, sp := range rs.ScopeSpans().At(0).Spans().All() {
				require.Equal(t, names.SpanEngineStep, sp.Name())
				a := sp.Attributes()
				idx, _ := a.Get(names.AttrStepIndex)
				w, ok := byIndex[idx.Int()]
				require.True(t, ok, idx.Int())
				seen++
				assert.Equal(t, w.start, uint64(sp.StartTimestamp()))
				assert.Equal(t, w.end, uint64(sp.EndTimestamp()))
				tid, _ := a.Get(names.AttrThreadID)
				assert.Equal(t, w.tid, tid.Int())
				missing, _ := a.Get(names.AttrStepGPUMissing)
				assert.Equal(t, "no_launches", missing.Str())
				_, hasKernels := a.Get(names.AttrStepGPUKernelCount)
				assert.False(t, hasKernels)
			}
		}
	}
	assert.Equal(t, len(want), seen)
	assert.Zero(t, h.sink.DataPointCount(), "no GPU activity, no kernel metrics")
}
