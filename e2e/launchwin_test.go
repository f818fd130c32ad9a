// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// launchCollector starts the built collector with the engine_step and
// cupti receivers feeding the inference processor.
func launchCollector(t *testing.T) (sink *e2etest.Sink, stepSock, cuptiSock string) {
	t.Helper()
	sink = e2etest.NewSink(t)
	dir := socketDir(t)
	stepSock, cuptiSock = filepath.Join(dir, "step.sock"), filepath.Join(dir, "cupti.sock")
	cfg := e2etest.Render(t, e2etest.NewPorts(t), t.TempDir(), fmt.Sprintf(`
extensions:
  step_store: {}
receivers:
  engine_step:
    endpoint: %s
    step_store: step_store
  cupti:
    endpoint: %s
    step_store: step_store
    collection_interval: 100ms
processors:
  privacy: {}
  step_figures:
    # Long enough that steps pass because their kernels are in.
    gpu:
      wait: 2m
      step_store: step_store
  inference:
    phase_spans: false
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
service:
  extensions: [step_store]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [engine_step]
      processors: [privacy, step_figures, inference]
      exporters: [otlp_grpc]
    metrics:
      receivers: [cupti]
      exporters: [otlp_grpc]
`, stepSock, cuptiSock, sink.Endpoint))
	e2etest.Start(t, e2etest.Options{Config: cfg})
	return sink, stepSock, cuptiSock
}

// launchSteps runs the fake engine with args and returns the run and its
// engine.step spans in step order, once every one has its GPU figures.
func launchSteps(t *testing.T, instance string, env []string, args ...string) (*launchRun, []stepSpan) {
	t.Helper()
	sink, stepSock, cuptiSock := launchCollector(t)
	run := runLaunchScenario(t, stepSock, cuptiSock, instance, sink, env, args...)
	for _, p := range run.procs {
		p.send(t)
	}
	var steps []stepSpan
	require.Eventually(t, func() bool {
		steps = steps[:0]
		for _, sp := range spansNamed(sink, names.SpanEngineStep) {
			if pid, _ := sp.res.Attributes().Get(names.ResourceProcessPID); pid.Int() == int64(run.out.PID) {
				steps = append(steps, sp)
			}
		}
		return len(steps) == len(run.out.Steps)
	}, 60*time.Second, 20*time.Millisecond)
	slices.SortFunc(steps, func(a, b stepSpan) int {
		return int(attrInt(a.span.Attributes(), names.AttrStepIndex) - attrInt(b.span.Attributes(), names.AttrStepIndex))
	})
	for i, sp := range steps {
		a := sp.span.Attributes()
		require.Equal(t, int64(i+1), attrInt(a, names.AttrStepIndex))
		ids, _ := a.Get(names.AttrStepRequestIDs)
		assert.Equal(t, toAny(run.out.Steps[i].RequestIDs), ids.Slice().AsRaw(), "step %d is batch %d", i+1, run.out.Steps[i].Batch)
	}
	return run, steps
}

// firstWindow is the start of a step span's first launch window.
func firstWindow(a pcommon.Map) uint64 {
	v, ok := a.Get(names.AttrStepLaunchStarts)
	if !ok || v.Slice().Len() == 0 {
		return 0
	}
	first := v.Slice().At(0).Int()
	for i := range v.Slice().Len() {
		first = min(first, v.Slice().At(i).Int())
	}
	return uint64(first)
}

// TestLaunchWindowsEndToEnd: the real hook on the fake engines, whose call
// structure follows vLLM's and SGLang's (step_with_batch_queue schedules
// and launches batch N+1 before it returns N; the overlap loop launches N
// before it processes N-1), a fake GPU behind the CPU, and the CUPTI
// records of every launch through the built collector. Every engine.step
// span's inferprof.step.gpu.* is exactly its own batch's kernels.
func TestLaunchWindowsEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		workers bool
	}{
		{"vllm async scheduling", []string{"--engine", "vllm"}, false},
		{"vllm sync scheduling", []string{"--engine", "vllm", "--sync"}, false},
		// Structured output under async scheduling: a batch is sampled after
		// the previous batch's update (step_with_batch_queue's deferred
		// branch), outside the step that launched the rest of it.
		{"vllm deferred structured sampling", []string{"--engine", "vllm", "--structured"}, false},
		{"sglang overlap loop", []string{"--engine", "sglang"}, false},
		// Older SGLang: the forward on TpModelWorkerClient's thread, whose
		// windows overlap the scheduler thread's in time.
		{"sglang forward thread", []string{"--engine", "sglang", "--overlap-thread"}, false},
		// Two executor workers that each spend 1 ms on a batch before
		// launching it: a worker launches a batch when its main thread gets
		// to it, within the engine's previous step (the fake GPU behind the
		// CPU: a batch's result comes back after the workers launched the
		// next one, whatever the machine's load), sometimes after the engine
		// enqueued the batch after that.
		{"vllm tensor parallel workers", []string{"--engine", "vllm", "--tp", "2", "--prep-ms", "1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, steps := launchSteps(t, "launch-"+tc.args[1], nil, tc.args...)
			graphs := int64(0)
			for i, sp := range steps {
				a := sp.span.Attributes()
				b := run.out.Steps[i]
				key := fmt.Sprintf("step %d (batch %d)", i+1, b.Batch)
				assert.Equal(t, int64(b.Batch), attrInt(a, names.AttrStepBatch), key)
				_, missing := a.Get(names.AttrStepGPUMissing)
				require.False(t, missing, "%s: %v", key, a.AsRaw())
				w := batchFigures(run.procs, b.Batch, func(uint32) uint64 { return firstWindow(a) })
				require.Positive(t, w.count, key)
				assert.InDelta(t, float64(w.kernelNS)/1e9, attrDouble(a, names.AttrStepGPUKernelTime), 1e-12, key)
				assert.Equal(t, w.count, attrInt(a, names.AttrStepGPUKernelCount), key)
				assert.Equal(t, w.graphs, attrInt(a, names.AttrStepGPUGraphCount), key)
				assert.InDelta(t, float64(w.busyNS)/1e9, attrDouble(a, names.AttrStepGPUBusyTime), 1e-12, key)
				gotCats := zip(a, names.AttrStepGPUCategories, names.AttrStepGPUCategoryTimes)
				require.Len(t, gotCats, len(w.categories), key)
				for cat, ns := range w.categories {
					assert.InDelta(t, float64(ns)/1e9, gotCats[cat], 1e-12, "%s %s", key, cat)
				}
				top, _ := a.Get(names.AttrStepGPUTopKernels)
				assert.Equal(t, toAny(w.top), top.Slice().AsRaw(), key)
				if !tc.workers {
					// In the engine's own process the reference for the idle gap
					// is the batch's first launch window, which the span carries.
					assert.InDelta(t, float64(w.idleBeforeNS)/1e9, attrDouble(a, names.AttrStepGPUIdleBefore), 1e-12, key)
					assert.InDelta(t, float64(w.idleNS)/1e9, attrDouble(a, names.AttrStepGPUIdleTime), 1e-12, key)
				}
				graphs += w.graphs
			}
			assert.Positive(t, graphs, "decode batches replay a CUDA graph")
			// The async shape is there (not with vLLM's step(), which waits for
			// each batch before it schedules the next): a batch's kernels run
			// while the next batch is launched, inside a step's range.
			// How far from the edge the shape is, for when it is not there.
			t.Logf("launches in other steps' ranges %d, launched while an earlier batch ran %d",
				launchesInOtherRanges(run, steps), launchedWhileRunning(run))
			switch {
			case tc.workers:
				assert.Positive(t, launchesInOtherRanges(run, steps), "worker launches inside another step's range")
			case tc.args[len(tc.args)-1] == "--sync":
				assert.Zero(t, launchedWhileRunning(run))
			default:
				assert.Positive(t, launchedWhileRunning(run), "batch N runs while N+1 is launched")
				assert.Positive(t, launchesInOtherRanges(run, steps), "launches inside another step's range")
			}
		})
	}
}

// TestWithoutLaunchWindowsStepsGetTheWrongKernels: the same runs with the
// hook's launch windows off (INFERPROF_LAUNCH_WINDOWS=0, what every hook
// before wire version 4 sent) tie kernels to steps by the steps' time
// ranges, as main did, and the figures are off by a batch.
func TestWithoutLaunchWindowsStepsGetTheWrongKernels(t *testing.T) {
	for _, args := range [][]string{{"--engine", "vllm"}, {"--engine", "sglang"}, {"--engine", "vllm", "--tp", "2"}} {
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			run, steps := launchSteps(t, "ranges-"+args[1], []string{"INFERPROF_LAUNCH_WINDOWS=0"}, args...)
			wrong := 0
			for i, sp := range steps {
				a := sp.span.Attributes()
				_, hasBatch := a.Get(names.AttrStepBatch)
				require.False(t, hasBatch)
				w := batchFigures(run.procs, run.out.Steps[i].Batch, func(uint32) uint64 { return 0 })
				if w.count != attrInt(a, names.AttrStepGPUKernelCount) ||
					fmt.Sprintf("%.9f", float64(w.kernelNS)/1e9) != fmt.Sprintf("%.9f", attrDouble(a, names.AttrStepGPUKernelTime)) {
					wrong++
				}
			}
			// Not every step: consecutive decode batches of one size launch
			// the same kernels for the same time, so a shifted attribution
			// gives some of them the right figures by chance.
			assert.Positive(t, wrong, "steps carry another batch's kernels")
			t.Logf("%d of %d steps carry figures other than their batch's", wrong, len(steps))
		})
	}
}

// launchedWhileRunning counts launches of a later batch made while one of
// an earlier batch's kernels ran on the process's GPU.
func launchedWhileRunning(run *launchRun) int {
	n := 0
	for _, p := range run.procs {
		for _, l := range p.log.Launches {
			for _, k := range p.log.Kernels {
				if k.Batch < l.Batch && k.Start <= l.Time && l.Time <= k.End {
					n++
					break
				}
			}
		}
	}
	return n
}

// launchesInOtherRanges counts launches that fall in the time range of a
// step that is not their batch's.
func launchesInOtherRanges(run *launchRun, steps []stepSpan) int {
	n := 0
	for i, sp := range steps {
		for _, p := range run.procs {
			for _, l := range p.log.Launches {
				if l.Batch != run.out.Steps[i].Batch && l.Time >= uint64(sp.span.StartTimestamp()) && l.Time <= uint64(sp.span.EndTimestamp()) {
					n++
				}
			}
		}
	}
	return n
}
