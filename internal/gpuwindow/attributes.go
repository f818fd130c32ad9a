// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow // import "github.com/inferprof/inferprof/internal/gpuwindow"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
)

// WriteAttributes writes a step's figures on its engine.step span, or why
// it has none (inferprof.step.gpu.*, docs/names.md).
func (r Result) WriteAttributes(a pcommon.Map) {
	if r.Missing != MissingNone {
		a.PutStr(names.AttrStepGPUMissing, string(r.Missing))
	}
	f := r.Figures
	if f.KernelCount == 0 {
		return
	}
	a.PutDouble(names.AttrStepGPUKernelTime, seconds(f.KernelNS))
	a.PutInt(names.AttrStepGPUKernelCount, int64(f.KernelCount))
	if f.GraphCount > 0 {
		a.PutInt(names.AttrStepGPUGraphCount, int64(f.GraphCount))
	}
	a.PutDouble(names.AttrStepGPUBusyTime, seconds(f.BusyNS))
	a.PutDouble(names.AttrStepGPUIdleBefore, seconds(f.IdleBeforeNS))
	a.PutDouble(names.AttrStepGPUIdleTime, seconds(f.IdleNS))
	cats := a.PutEmptySlice(names.AttrStepGPUCategories)
	times := a.PutEmptySlice(names.AttrStepGPUCategoryTimes)
	cats.EnsureCapacity(len(f.Categories))
	times.EnsureCapacity(len(f.Categories))
	for _, c := range f.Categories {
		cats.AppendEmpty().SetStr(c.Category)
		times.AppendEmpty().SetDouble(seconds(c.NS))
	}
	top := a.PutEmptySlice(names.AttrStepGPUTopKernels)
	topT := a.PutEmptySlice(names.AttrStepGPUTopTimes)
	for _, k := range f.Top {
		top.AppendEmpty().SetStr(k.Name)
		topT.AppendEmpty().SetDouble(seconds(k.NS))
	}
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

// ReadLaunchWindows reads what the engine_step receiver puts on a step span
// of wire version 4 (docs/names.md): the batch number, the scheduled
// tokens, and the intervals in which the engine process launched the
// batch. Absent or inconsistent attributes leave the step to its time
// range.
func (si *StepInfo) ReadLaunchWindows(a pcommon.Map) {
	if v, ok := a.Get(names.AttrStepBatch); ok {
		si.Batch = uint64(v.Int())
	}
	if v, ok := a.Get(names.AttrStepScheduledToks); ok {
		si.ScheduledTokens = uint32(v.Int())
	}
	starts, ends, threads := intSlice(a, names.AttrStepLaunchStarts), intSlice(a, names.AttrStepLaunchEnds),
		intSlice(a, names.AttrStepLaunchThreads)
	n := starts.Len()
	if n == 0 || ends.Len() != n || threads.Len() != n {
		return
	}
	si.Windows = make([]LaunchWindow, 0, n)
	for i := range n {
		lw := LaunchWindow{Start: starts.At(i).Int(), End: ends.At(i).Int(), ThreadID: uint32(threads.At(i).Int())}
		if lw.End < lw.Start {
			si.Windows = nil
			return
		}
		si.Windows = append(si.Windows, lw)
	}
}

// intSlice returns attribute k as a slice, empty when absent or not one.
func intSlice(a pcommon.Map, k string) pcommon.Slice {
	if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeSlice {
		return v.Slice()
	}
	return pcommon.NewSlice()
}
