// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepNames is collected that also names kernels for step figures.
type stepNames struct{ collected }

func (s *stepNames) KernelName(id uint32) string { return s.names[id] }
func (s *stepNames) Category(uint32) string      { return "other" }

// A small trace in PyTorch's layout: two ProfilerStep annotations on the
// main thread, a launch in each, one on another thread of the process (as
// autograd's backward thread does) and one in another process, the kernels
// they launched, running into the next step.
const twoSteps = `{"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#7","pid":10,"tid":11,"ts":100,"dur":50},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#8","pid":10,"tid":11,"ts":150,"dur":50},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":110,"dur":5,"args":{"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":99,"ts":120,"dur":5,"args":{"correlation":2}},
{"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","pid":10,"tid":11,"ts":160,"dur":5,"args":{"correlation":3}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":20,"tid":21,"ts":165,"dur":5,"args":{"correlation":4}},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":140,"dur":20,"args":{"device":0,"correlation":1}},
{"ph":"X","cat":"kernel","name":"other_thread","pid":0,"tid":7,"ts":161,"dur":2,"args":{"device":0,"correlation":2}},
{"ph":"X","cat":"kernel","name":"attn","pid":0,"tid":7,"ts":170,"dur":10,"args":{"device":0,"correlation":3}},
{"ph":"X","cat":"kernel","name":"other_process","pid":0,"tid":7,"ts":185,"dur":3,"args":{"device":0,"correlation":4}}
],"baseTimeNanoseconds":1000}`

func TestStepsByLaunchInTheAnnotationProcess(t *testing.T) {
	t.Parallel()
	h := &stepNames{}
	sum, err := Read(bytes.NewReader([]byte(twoSteps)), h, Limits{Batch: 100, Intervals: 100, NameBytes: 1000, StepEvents: 100})
	require.NoError(t, err)
	require.Len(t, sum.Steps, 2)
	s7, s8 := sum.Steps[0], sum.Steps[1]
	assert.Equal(t, uint64(7), s7.Index)
	assert.Equal(t, uint64(1000+100_000), s7.Start)
	assert.Equal(t, uint64(22_000), s7.Result.Figures.KernelNS, "its kernels ran into step 8, and are step 7's, the other thread's too")
	assert.Equal(t, uint64(2), s7.Result.Figures.KernelCount)
	assert.Equal(t, uint64(40_000), s7.Result.Figures.IdleBeforeNS, "from the step's start to its kernel")
	assert.Equal(t, uint64(10_000), s8.Result.Figures.KernelNS, "not the other process's kernel")
	assert.Equal(t, uint64(1), s8.Result.Figures.KernelCount)
	assert.Equal(t, uint64(170_000-163_000), s8.Result.Figures.IdleBeforeNS, "after the device's previous kernel")
	assert.Equal(t, "attn", s8.Result.Figures.Top[0].Name)
}

func TestStepEventsBound(t *testing.T) {
	t.Parallel()
	sum, err := Read(bytes.NewReader([]byte(twoSteps)), &stepNames{}, Limits{Batch: 100, Intervals: 100, NameBytes: 1000, StepEvents: 4})
	require.NoError(t, err)
	for _, s := range sum.Steps {
		if s.Result.Figures.KernelCount > 0 {
			assert.Equal(t, "incomplete", string(s.Result.Missing))
		}
	}
}

// FuzzReadSteps reads arbitrary bytes with step figures on: no panic, and
// the figures of every step are consistent.
func FuzzReadSteps(f *testing.F) {
	f.Add([]byte(twoSteps))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":10}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sum, err := Read(bytes.NewReader(b), &stepNames{}, Limits{Batch: 3, Intervals: 4, NameBytes: 64, StepEvents: 16})
		if err != nil {
			return
		}
		for _, s := range sum.Steps {
			fig := s.Result.Figures
			if fig.BusyNS > fig.KernelNS || fig.IdleBeforeNS > fig.IdleNS || s.End < s.Start {
				t.Fatalf("inconsistent step %+v", s)
			}
			if fig.KernelCount == 0 && s.Result.Missing == "" {
				t.Fatalf("a step without kernels must say why: %+v", s)
			}
		}
	})
}

// Launches whose pid no annotation has (CUPTI and the profiler in different
// pid namespaces) are matched by time alone; overlapping annotations give a
// launch to the latest-starting one that holds it.
func TestStepsByTimeWhenNoProcessMatches(t *testing.T) {
	t.Parallel()
	const trace = `{"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":100,"dur":100},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":2,"ts":120,"dur":10},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":5,"tid":5,"ts":110,"dur":1,"args":{"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":5,"tid":6,"ts":125,"dur":1,"args":{"correlation":2}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":5,"tid":6,"ts":150,"dur":1,"args":{"correlation":3}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":5,"tid":6,"ts":250,"dur":1,"args":{"correlation":4}},
{"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":111,"dur":1,"args":{"device":0,"correlation":1}},
{"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":126,"dur":2,"args":{"device":0,"correlation":2}},
{"ph":"X","cat":"kernel","name":"c","pid":0,"tid":7,"ts":151,"dur":4,"args":{"device":0,"correlation":3}},
{"ph":"X","cat":"kernel","name":"d","pid":0,"tid":7,"ts":251,"dur":8,"args":{"device":0,"correlation":4}}
]}`
	sum, err := Read(bytes.NewReader([]byte(trace)), &stepNames{}, Limits{Batch: 100, Intervals: 100, NameBytes: 1000, StepEvents: 100})
	require.NoError(t, err)
	require.Len(t, sum.Steps, 2)
	assert.Equal(t, uint64(5_000), sum.Steps[0].Result.Figures.KernelNS, "a and c; d was launched after the step")
	assert.Equal(t, uint64(2_000), sum.Steps[1].Result.Figures.KernelNS, "b, inside the later annotation")
}
