// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// stepW registers a step with a time range, a batch number and launch
// windows on thread 7 (pairs of µs).
func (tl *timeline) stepW(index, batch uint64, startUS, endUS int64, windows ...[2]int64) bool {
	si := StepInfo{
		Engine: tl.engine, Index: index, LaunchStart: at(startUS), LaunchEnd: at(endUS), Batch: batch,
		Deadline: tl.now.Add(5 * time.Second), Ref: index, Link: Link{Index: index}, ScheduledTokens: 4,
	}
	for _, w := range windows {
		si.Windows = append(si.Windows, LaunchWindow{Start: at(w[0]), End: at(w[1]), ThreadID: 7})
	}
	ok, _ := tl.w.AddStep(si)
	return ok
}

func (tl *timeline) launchOn(tid uint32, atUS int64) uint32 {
	tl.corr++
	tl.src.Launches([]cuptiwire.Launch{{Kind: cuptiwire.LaunchKindKernel, Correlation: tl.corr, ThreadID: tid, Time: uint64(at(atUS))}}, tl.now)
	return tl.corr
}

// vLLM's batch queue: step 1 runs from its scheduling to its update, and
// batch 2 is launched inside that range, before step 1's update; step 2
// comes later. The windows put each launch in its own batch's step.
func TestLaunchWindowsOverrideTheRange(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{}), "h", 100, 1, "")
	require.True(t, tl.stepW(1, 1, 0, 1000, [2]int64{100, 200}, [2]int64{250, 300}))
	a := tl.launch(cuptiwire.LaunchKindKernel, 150) // batch 1's forward
	g := tl.launch(cuptiwire.LaunchKindGraph, 650)  // batch 2's graph, inside step 1's range
	s := tl.launch(cuptiwire.LaunchKindKernel, 280) // batch 1's sampler
	b := tl.launchOn(7, 720)                        // batch 2's sampler
	assert.Equal(t, 2, tl.w.Stats().PendingLaunches, "batch 2's launches wait for its step")
	require.True(t, tl.stepW(2, 2, 1000, 2000, [2]int64{600, 700}, [2]int64{710, 730}))
	tl.mark(2100)
	tl.kernel(a, 1, "attention", 200, 900, false)
	tl.kernel(s, 2, "gemm", 900, 950, false)
	for i, sr := range []uint32{4, 1, 2} {
		tl.kernel(g, sr, "gemm", int64(960+100*i), int64(1050+100*i), true)
	}
	tl.kernel(b, 2, "gemm", 1300, 1320, false)
	got := tl.collect(time.Second)
	require.Len(t, got, 2)
	assert.Equal(t, MissingNone, got[1].Missing)
	assert.Equal(t, uint64(2), got[1].Figures.KernelCount)
	assert.Equal(t, us(750), got[1].Figures.KernelNS)
	assert.Equal(t, us(100), got[1].Figures.IdleBeforeNS, "from the first window's start, not the step's")
	assert.Equal(t, uint64(4), got[2].Figures.KernelCount)
	assert.Equal(t, uint64(1), got[2].Figures.GraphCount)
	assert.Equal(t, us(3*90+20), got[2].Figures.KernelNS)
	assert.Equal(t, us(10), got[2].Figures.IdleBeforeNS, "after batch 1's last kernel")
	assert.Zero(t, tl.w.Stats().LaunchesOutside)
}

// Launches between a batch's windows (another call of the engine thread)
// and launches of another thread within them belong to no step. One
// between the windows waits for the next step, which might have filled
// the gap (see TestOverlappingWindowsOfTwoThreads).
func TestLaunchesOutsideTheWindows(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{}), "h", 100, 1, "")
	require.True(t, tl.stepW(1, 1, 0, 1000, [2]int64{100, 200}, [2]int64{400, 500}))
	in := tl.launchOn(7, 150)
	between := tl.launchOn(7, 300) // e.g. a DP dummy batch
	other := tl.launchOn(9, 450)   // another thread
	assert.Equal(t, 1, tl.w.Stats().PendingLaunches, "the gap may be the next step's")
	require.True(t, tl.stepW(2, 2, 1000, 2000, [2]int64{1100, 1200}))
	assert.Zero(t, tl.w.Stats().PendingLaunches)
	tl.mark(1300)
	tl.kernel(in, 1, "attention", 200, 260, false)
	tl.kernel(between, 1, "attention", 310, 320, false)
	tl.kernel(other, 1, "attention", 460, 470, false)
	got := tl.collect(time.Second)
	assert.Equal(t, uint64(1), got[1].Figures.KernelCount)
	assert.Equal(t, uint64(2), tl.w.Stats().KernelsOutside)
}

// stepThreads registers step index (batch index) with launch windows on
// the threads they name; its range runs from the first to the last.
func (tl *timeline) stepThreads(index uint64, ws ...LaunchWindow) {
	ok, _ := tl.w.AddStep(StepInfo{Engine: tl.engine, Index: index, Batch: index, LaunchStart: ws[0].Start, LaunchEnd: ws[len(ws)-1].End,
		Windows: ws, Deadline: tl.now.Add(5 * time.Second), Ref: index})
	require.True(tl.t, ok)
}

// Old SGLang launches a batch's forward on its own thread while the
// scheduler thread prepares the next batch: windows of two threads overlap
// in time, and each launch goes by its thread. Whether the steps or the
// launches reach the window first: when the CUPTI stream runs ahead of the
// step stream (the collector reads the steps late), batch 2's launches
// fall before step 1's last window (its processing, on the scheduler
// thread) and must wait for step 2 rather than be called outside.
func TestOverlappingWindowsOfTwoThreads(t *testing.T) {
	t.Parallel()
	for _, stepsFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "steps first", false: "launches first"}[stepsFirst], func(t *testing.T) {
			t.Parallel()
			tl := newTimeline(t, New(Config{}), "h", 100, 1, "")
			// Batch 1: scheduler thread 7 at 0-100 and 1000-1100 (its
			// processing), forward thread 8 at 100-900. Batch 2: scheduler
			// thread 7 at 300-400 (during batch 1's forward), forward thread
			// 8 at 900-1500.
			tl.stepThreads(1, LaunchWindow{at(0), at(100), 7}, LaunchWindow{at(100), at(900), 8}, LaunchWindow{at(1000), at(1100), 7})
			step2 := func() { tl.stepThreads(2, LaunchWindow{at(300), at(400), 7}, LaunchWindow{at(900), at(1500), 8}) }
			if stepsFirst {
				step2()
			}
			f1 := tl.launchOn(8, 350)
			p2 := tl.launchOn(7, 360)
			f2 := tl.launchOn(8, 1050) // during step 1's processing
			if !stepsFirst {
				assert.Equal(t, 2, tl.w.Stats().PendingLaunches, "batch 2's launches wait for its step")
				step2()
			}
			tl.mark(1600)
			tl.kernel(f1, 1, "attention", 400, 800, false)
			tl.kernel(p2, 2, "gemm", 800, 810, false)
			tl.kernel(f2, 1, "attention", 1100, 1300, false)
			got := tl.collect(time.Second)
			assert.Equal(t, us(400), got[1].Figures.KernelNS)
			assert.Equal(t, us(210), got[2].Figures.KernelNS)
			assert.Zero(t, tl.w.Stats().LaunchesOutside)
		})
	}
}

// worker is a tensor-parallel executor worker of the timeline's engine,
// with its own CUPTI stream.
func (tl *timeline) worker(pid uint32) *timeline {
	w := &timeline{t: tl.t, w: tl.w, engine: tl.engine, cat: tl.cat, now: tl.now}
	w.src = tl.w.OpenSource(SourceInfo{Host: tl.engine.Host, PID: pid, PPID: tl.engine.PID, Instance: tl.engine.Instance}, testNames)
	require.NotNil(tl.t, w.src)
	return w
}

func (tl *timeline) markW(pid uint32, batch uint64, startUS, endUS int64, final bool, tokens uint32) {
	tl.w.Mark(MarkInfo{Host: tl.engine.Host, PID: pid, PPID: tl.engine.PID, Instance: tl.engine.Instance, Batch: batch,
		Start: at(startUS), End: at(endUS), ThreadID: pid, Final: final, ScheduledTokens: tokens}, tl.now)
}

// A worker launches each batch when its main thread gets to it, late
// against the engine: its launches go to steps by its launch marks, whose
// batch numbers are the engine's.
func TestWorkerLaunchesGoByTheirMarks(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	eng := newTimeline(t, w, "h", 200, 1, "inst")
	eng.src.Close() // the engine process itself runs no kernels (multiprocess executor)
	// A mark comes before the worker's stream opens: it is linked on open.
	eng.markW(201, 0, 0, 0, true, 0)
	wk := eng.worker(201)
	// The engine's steps: each range holds the next batch's enqueueing, and
	// the worker lags a whole batch behind.
	require.True(t, eng.stepW(1, 1, 0, 1000, [2]int64{10, 11}, [2]int64{12, 13}))
	require.True(t, eng.stepW(2, 2, 1000, 2000, [2]int64{900, 901}, [2]int64{902, 903}))
	a := wk.launchOn(201, 500)  // batch 1, during step 1's range
	b := wk.launchOn(201, 1500) // batch 2, during step 2's range
	c := wk.launchOn(201, 1700) // batch 2's sampler
	assert.Equal(t, 3, w.Stats().PendingLaunches, "no mark yet: the launches wait")
	eng.markW(201, 1, 400, 1400, false, 4)
	eng.markW(201, 1, 1400, 1450, true, 4)
	// Batch 1's launch at 500 is placed; batch 2's wait for their mark.
	assert.Equal(t, 2, w.Stats().PendingLaunches)
	eng.markW(201, 2, 1450, 1600, false, 4)
	wk.mark(2100)
	wk.kernel(a, 1, "attention", 600, 1500, false)
	wk.kernel(b, 2, "gemm", 1600, 1700, false)
	wk.kernel(c, 2, "gemm", 1750, 1760, false)
	got := eng.collect(time.Second)
	require.Contains(t, got, uint64(1))
	assert.Equal(t, us(900), got[1].Figures.KernelNS)
	assert.Equal(t, us(200), got[1].Figures.IdleBeforeNS, "from the worker's first window of the batch")
	assert.NotContains(t, got, uint64(2), "its final mark has not come: the sampler's launch is still held")
	eng.markW(201, 2, 1650, 1800, true, 4)
	got = eng.collect(time.Second)
	require.Contains(t, got, uint64(2))
	assert.Equal(t, MissingNone, got[2].Missing)
	assert.Equal(t, uint64(2), got[2].Figures.KernelCount)
	assert.Equal(t, us(110), got[2].Figures.KernelNS)
	st := w.Stats()
	assert.Equal(t, uint64(5), st.Marks)
	assert.Zero(t, st.LaunchesOutside)
}

// A worker whose batch count drifted from the engine's carries another
// token count for the batch: the step is counted and marked incomplete.
// A lost final mark does not hold a step once a later batch's mark came.
func TestWorkerMarkMismatchAndLostFinal(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	eng := newTimeline(t, w, "h", 300, 1, "")
	eng.src.Close()
	wk := eng.worker(301)
	require.True(t, eng.stepW(1, 1, 0, 1000, [2]int64{0, 1}))
	require.True(t, eng.stepW(2, 2, 1000, 2000, [2]int64{1000, 1001}))
	eng.markW(301, 1, 100, 200, false, 9) // 9 tokens, the step says 4; its final mark is lost
	eng.markW(301, 2, 1100, 1200, true, 4)
	a := wk.launchOn(301, 150)
	b := wk.launchOn(301, 1150)
	wk.mark(2100)
	wk.kernel(a, 1, "attention", 200, 300, false)
	wk.kernel(b, 1, "attention", 1200, 1300, false)
	got := eng.collect(time.Second)
	require.Len(t, got, 2)
	assert.Equal(t, MissingIncomplete, got[1].Missing)
	assert.Equal(t, MissingNone, got[2].Missing)
	assert.Equal(t, uint64(1), w.Stats().MarksMismatched)
}

// A worker that sends no marks (no hook in it) is matched by the steps'
// time ranges, as before launch windows.
func TestWorkerWithoutMarksFallsBackToTheRange(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	eng := newTimeline(t, w, "h", 400, 1, "")
	eng.src.Close()
	wk := eng.worker(401)
	require.True(t, eng.stepW(1, 1, 0, 1000, [2]int64{0, 1}))
	a := wk.launchOn(401, 500)
	wk.mark(1100)
	wk.kernel(a, 1, "attention", 600, 700, false)
	got := eng.collect(time.Second)
	assert.Equal(t, us(100), got[1].Figures.KernelNS)
}

// Marks are bounded: kept until their batch's step is final, and the
// workers remembered are bounded like the sources.
func TestMarksAreBounded(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxSources: 2})
	eng := newTimeline(t, w, "h", 500, 1, "")
	eng.src.Close()
	for pid := uint32(501); pid < 505; pid++ {
		eng.markW(pid, 0, 0, 0, true, 0)
	}
	assert.Len(t, w.marks, 2)
	assert.NotContains(t, w.marks, procKey{"h", 501}, "the worker heard from least recently goes")
	assert.Contains(t, w.marks, procKey{"h", 504})

	wk := eng.worker(510)
	require.True(t, eng.stepW(1, 1, 0, 1000, [2]int64{0, 1}))
	eng.markW(510, 1, 100, 200, true, 4)
	a := wk.launchOn(510, 150)
	wk.mark(1100)
	wk.kernel(a, 1, "attention", 200, 300, false)
	require.Len(t, eng.collect(time.Second), 1)
	assert.Empty(t, w.marks[procKey{"h", 510}].wins, "batch 1's marks go with its step")
}
