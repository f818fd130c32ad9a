// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow // import "github.com/inferprof/inferprof/internal/gpuwindow"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepspan"
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

// FromStep takes what the window needs of an engine.step span read by
// stepspan: the index, the engine thread, the batch number, the scheduled
// tokens, and the intervals in which the engine process launched the batch
// (wire version 4; without them the step is left to its time range).
// Absent values read as 0. The windows are copied: st's are reused.
func (si *StepInfo) FromStep(st *stepspan.Step) {
	si.Index = uint64(max(st.Index, 0))
	si.Link.Index = si.Index
	si.ThreadID = uint32(max(st.ThreadID, 0))
	si.Batch = uint64(max(st.Batch, 0))
	si.ScheduledTokens = uint32(max(st.ScheduledTokens, 0))
	si.Windows = nil
	if len(st.Windows) > 0 {
		si.Windows = make([]LaunchWindow, len(st.Windows))
		for i, w := range st.Windows {
			si.Windows[i] = LaunchWindow{Start: w.Start, End: w.End, ThreadID: w.ThreadID}
		}
	}
}
