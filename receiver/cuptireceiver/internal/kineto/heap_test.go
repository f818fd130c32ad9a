// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto

import (
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto/kinetotest"
)

// heapProbe measures the live heap (after a collection) every `every`
// bytes the reader pulls through it.
type heapProbe struct {
	r          io.Reader
	every, cur int
	total      int64
	peak       uint64
}

func (h *heapProbe) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.cur += n
	h.total += int64(n)
	if h.cur >= h.every {
		h.cur = 0
		h.sample()
	}
	return n, err
}

func (h *heapProbe) sample() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
}

// peakHeap streams the real NCCL trace repeated copies times through the
// reader, generated on the fly so the input never sits in memory, and
// returns the input size and the reader's peak live heap above the
// baseline.
func peakHeap(t *testing.T, tr *kinetotest.Trace, copies int) (input int64, peak uint64) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tr.Write(pw, copies)) }()
	probe := &heapProbe{r: pr, every: 4 << 20}
	probe.sample()
	base := probe.peak
	probe.peak = 0
	var c countSink
	sum, err := Read(probe, &c, DefaultLimits)
	require.NoError(t, err)
	require.Equal(t, uint64(tr.Events()*copies), sum.Events)
	probe.sample()
	if probe.peak < base {
		return probe.total, 0
	}
	return probe.total, probe.peak - base
}

// The reader's memory is bounded by its limits, not by the file: a trace
// four times larger (hundreds of MB of JSON) needs about the same heap.
func TestHeapBoundedByLimitsNotFileSize(t *testing.T) {
	tr, err := kinetotest.Load(filepath.Join(FixtureDir, kinetotest.Fixture))
	require.NoError(t, err)
	small := 4
	if raceEnabled {
		small = 2
	}
	smallIn, smallPeak := peakHeap(t, tr, small)
	bigIn, bigPeak := peakHeap(t, tr, 4*small)
	t.Logf("input %d MB: peak live heap +%.1f MB; input %d MB: +%.1f MB",
		smallIn>>20, float64(smallPeak)/(1<<20), bigIn>>20, float64(bigPeak)/(1<<20))
	require.Greater(t, bigIn, 4*smallIn-(1<<20))
	// DefaultLimits cap a file's state near 40 MiB; this trace stays far below.
	require.Less(t, bigPeak, uint64(48<<20), "peak heap for %d MB of input", bigIn>>20)
	require.Less(t, bigPeak, uint64(bigIn)/4, "heap is a small part of the input")
	// Four times the input, not four times the heap: growth within one
	// batch of records (128 Ki × 56 B = 7 MiB) and the name table.
	require.Less(t, bigPeak, smallPeak+(12<<20))
}
