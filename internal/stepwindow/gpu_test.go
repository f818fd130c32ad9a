// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request's GPU time is its token share of each step's kernel time; its
// CPU overhead is the whole idle time of each of its steps.
func TestRequestShareOfStepGPU(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	base := time.Unix(1000, 0)
	ns := func(ms int64) int64 { return base.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	r1, ok := w.AddRef("svc", &Step{Source: 1, Index: 1, StartUnixNs: ns(0), EndUnixNs: ns(10),
		RequestIDs: []string{"a", "b"}, RequestTokens: []int64{1, 3}})
	require.True(t, ok)
	r2, ok := w.AddRef("svc", &Step{Source: 1, Index: 2, StartUnixNs: ns(10), EndUnixNs: ns(20),
		RequestIDs: []string{"a"}, RequestTokens: []int64{1}})
	require.True(t, ok)
	r3, ok := w.AddRef("svc", &Step{Source: 1, Index: 3, StartUnixNs: ns(20), EndUnixNs: ns(30),
		RequestIDs: []string{"a", "b"}, RequestTokens: []int64{1, 1}})
	require.True(t, ok)
	w.SetGPU(r1, &GPU{Known: true, KernelNS: 8000, IdleNS: 100, Categories: []GPUCategory{{"attention", 6000}, {"gemm", 2000}}})
	w.SetGPU(r2, &GPU{Known: true, KernelNS: 1000, IdleNS: 50, Categories: []GPUCategory{{"gemm", 1000}}})
	w.SetGPUPending(r3)

	got := w.Lookup("svc", "a", base, base.Add(time.Second)).GPU
	assert.Equal(t, 2, got.Steps)
	assert.Equal(t, 1, got.Pending)
	assert.InDelta(t, 8000.0/4+1000, got.TimeNS, 1e-9)
	assert.Equal(t, uint64(150), got.CPUOverheadNS)
	got.SortCategories()
	assert.Equal(t, []RequestCategory{{"attention", 1500}, {"gemm", 500 + 1000}}, got.Categories, "a tie orders by name")

	w.SetGPU(r3, &GPU{Missing: "no_kernels"})
	got = w.Lookup("svc", "b", base, base.Add(time.Second)).GPU
	assert.Equal(t, 1, got.Steps)
	assert.Zero(t, got.Pending)
	assert.Equal(t, 1, got.Missing)
	assert.Equal(t, "no_kernels", got.MissingReason)
	assert.InDelta(t, 8000.0*3/4, got.TimeNS, 1e-9)
}

func TestSetGPUOnAnEvictedStep(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxSteps: 1})
	r1, ok := w.AddRef("svc", &Step{Source: 1, Index: 1, EndUnixNs: 1, RequestIDs: []string{"a"}})
	require.True(t, ok)
	_, ok = w.AddRef("svc", &Step{Source: 1, Index: 2, EndUnixNs: 2, RequestIDs: []string{"a"}})
	require.True(t, ok)
	w.SetGPU(r1, &GPU{Known: true, KernelNS: 5}) // gone: nothing happens
	_, ok = w.AddRef("svc", &Step{Source: 1, Index: 2, EndUnixNs: 3})
	assert.False(t, ok, "a repeated step is dropped")
	assert.False(t, w.Lookup("svc", "a", time.Unix(0, 2), time.Time{}).GPU.Known())
}
