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
