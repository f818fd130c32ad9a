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

// names resolves series ids to kernel names.
type kernelNames []string

func (n kernelNames) KernelName(s uint32) string { return n[s] }

var testNames = kernelNames{"other", "flash_fwd", "gemm_a", "gemm_b", "rms_norm", "allreduce"}

// t0 is the timeline origin, in Unix ns.
const t0 = int64(1_700_000_000_000_000_000)

func at(us int64) int64 { return t0 + us*1000 }

// timeline is one engine process and the CUPTI stream of the process that
// runs its model, with helpers to play steps, launches and kernels on it.
type timeline struct {
	t      *testing.T
	w      *Window
	src    *Source
	engine EngineKey
	cat    map[string]uint8
	corr   uint32
	now    time.Time
}

func newTimeline(t *testing.T, w *Window, host string, pid, ppid uint32, instance string) *timeline {
	t.Helper()
	tl := &timeline{t: t, w: w, engine: EngineKey{Host: host, PID: pid, Instance: instance}, cat: map[string]uint8{}, now: time.Unix(0, t0)}
	tl.src = w.OpenSource(SourceInfo{Host: host, PID: pid, PPID: ppid, Instance: instance}, testNames)
	require.NotNil(t, tl.src)
	for _, c := range []string{"attention", "gemm", "normalization", "communication"} {
		tl.cat[c] = w.CategoryID(c)
	}
	return tl
}

// step registers a step with launch window [startUS, endUS].
func (tl *timeline) step(index uint64, startUS, endUS int64) bool {
	ok, _ := tl.w.AddStep(StepInfo{
		Engine: tl.engine, Index: index, LaunchStart: at(startUS), LaunchEnd: at(endUS),
		Deadline: tl.now.Add(5 * time.Second), Ref: index, Link: Link{Index: index},
	})
	return ok
}

// launch sends one launch at atUS and returns its correlation id.
func (tl *timeline) launch(kind cuptiwire.LaunchKind, atUS int64) uint32 {
	tl.corr++
	tl.src.Launches([]cuptiwire.Launch{{Kind: kind, Correlation: tl.corr, ThreadID: 7, Time: uint64(at(atUS))}}, tl.now)
	return tl.corr
}

func (tl *timeline) mark(atUS int64) {
	tl.src.Launches([]cuptiwire.Launch{{Kind: cuptiwire.LaunchKindMark, Time: uint64(at(atUS))}}, tl.now)
}

func (tl *timeline) kernel(corr uint32, series uint32, cat string, startUS, endUS int64, graph bool) {
	tl.src.Kernels([]Kernel{{
		Correlation: corr, Series: series, Category: tl.cat[cat], Start: uint64(at(startUS)), End: uint64(at(endUS)), Graph: graph,
	}}, tl.now)
}

func (tl *timeline) collect(after time.Duration) map[uint64]Result {
	tl.now = tl.now.Add(after)
	out := map[uint64]Result{}
	for _, r := range tl.w.Collect(tl.now, nil, nil) {
		out[r.Ref.(uint64)] = r
	}
	return out
}

func us(n int64) uint64 { return uint64(n * 1000) }

// Async scheduling: step 2's CPU work (and launches) runs while step 1's
// kernels execute. Each step gets the kernels it launched, not those that
// overlap its time.
func TestKernelsGoToTheStepThatLaunchedThem(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{}), "h", 100, 1, "i")
	require.True(t, tl.step(1, 0, 1000))
	require.True(t, tl.step(2, 1000, 2000))
	a := tl.launch(cuptiwire.LaunchKindKernel, 100)
	b := tl.launch(cuptiwire.LaunchKindKernel, 200)
	c := tl.launch(cuptiwire.LaunchKindKernel, 1100)
	tl.mark(2500)
	// Step 1's kernels run from 900 to 1700, during step 2's window.
	tl.kernel(a, 1, "attention", 900, 1300, false)
	tl.kernel(b, 2, "gemm", 1300, 1700, false)
	tl.kernel(c, 2, "gemm", 1800, 1900, false)

	got := tl.collect(time.Second)
	require.Len(t, got, 2)
	s1, s2 := got[1], got[2]
	assert.Equal(t, MissingNone, s1.Missing)
	assert.Equal(t, us(800), s1.Figures.KernelNS)
	assert.Equal(t, uint64(2), s1.Figures.KernelCount)
	assert.Equal(t, us(800), s1.Figures.BusyNS)
	assert.Equal(t, []CategoryTime{{"attention", us(400)}, {"gemm", us(400)}}, s1.Figures.Categories)
	// No kernel ran before: the GPU idled from the step's start.
	assert.Equal(t, us(900), s1.Figures.IdleBeforeNS)
	assert.Equal(t, us(100), s2.Figures.KernelNS)
	assert.Equal(t, uint64(1), s2.Figures.KernelCount)
	// Step 2's first kernel started 100 µs after step 1's last ended.
	assert.Equal(t, us(100), s2.Figures.IdleBeforeNS)
	assert.Equal(t, []KernelTime{{Name: "gemm_a", Category: "gemm", NS: us(100), Count: 1}}, s2.Figures.Top)
}

// Kernels of a CUDA graph share the graph launch's correlation id: node
// mode counts each kernel, graph mode counts the graph.
func TestGraphLaunches(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{}), "h", 100, 1, "")
	require.True(t, tl.step(1, 0, 1000))
	require.True(t, tl.step(2, 1000, 2000))
	g := tl.launch(cuptiwire.LaunchKindGraph, 10)
	for i, s := range []uint32{2, 4, 1, 2} {
		start := int64(100 + 50*i)
		tl.kernel(g, s, map[uint32]string{1: "attention", 2: "gemm", 4: "normalization"}[s], start, start+40, true)
	}
	g2 := tl.launch(cuptiwire.LaunchKindGraph, 1010)
	tl.mark(2001)
	tl.src.Kernels([]Kernel{{Correlation: g2, Start: uint64(at(1100)), End: uint64(at(1400)), Graph: true, GraphRecord: true}}, tl.now)

	got := tl.collect(time.Second)
	require.Len(t, got, 2)
	assert.Equal(t, uint64(4), got[1].Figures.KernelCount)
	assert.Equal(t, uint64(1), got[1].Figures.GraphCount)
	assert.Equal(t, us(160), got[1].Figures.KernelNS)
	// Busy 160 µs over the 190 µs from first start to last end: 30 µs idle within.
	assert.Equal(t, us(160), got[1].Figures.BusyNS)
	assert.Equal(t, us(100+30), got[1].Figures.IdleNS)
	assert.Equal(t, "gemm_a", got[1].Figures.Top[0].Name)
	assert.Equal(t, uint64(2), got[1].Figures.Top[0].Count)
	assert.Equal(t, uint64(1), got[2].Figures.KernelCount)
	assert.Equal(t, us(300), got[2].Figures.KernelNS)
}

// Two replicas with one service name on one host differ by pid and
// instance id; an executor worker serves its parent engine.
func TestSourcesServeTheirEngine(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	r1 := newTimeline(t, w, "h", 100, 1, "replica-1")
	r2 := newTimeline(t, w, "h", 200, 1, "replica-2")
	worker := newTimeline(t, w, "h", 201, 200, "replica-2")
	worker.engine = r2.engine
	require.True(t, r1.step(1, 0, 1000))
	require.True(t, r2.step(2, 0, 1000))
	k1 := r1.launch(cuptiwire.LaunchKindKernel, 10)
	k2 := r2.launch(cuptiwire.LaunchKindKernel, 10)
	kw := worker.launch(cuptiwire.LaunchKindKernel, 20)
	r1.mark(1001)
	r2.mark(1001)
	worker.mark(1001)
	r1.kernel(k1, 1, "attention", 100, 200, false)
	r2.kernel(k2, 1, "attention", 100, 400, false)
	worker.kernel(kw, 5, "communication", 100, 150, false)

	got := r1.collect(time.Second)
	require.Len(t, got, 2)
	assert.Equal(t, us(100), got[1].Figures.KernelNS)
	assert.Equal(t, uint64(1), got[1].Figures.KernelCount)
	assert.Equal(t, us(350), got[2].Figures.KernelNS, "replica 2's step has its own and its worker's kernel")
	assert.Equal(t, uint64(2), got[2].Figures.KernelCount)
	assert.Equal(t, []CategoryTime{{"attention", us(300)}, {"communication", us(50)}}, got[2].Figures.Categories)
}

func TestInstanceMismatchDoesNotAttach(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	tl := newTimeline(t, w, "h", 100, 1, "a")
	tl.engine.Instance = "b"
	assert.False(t, tl.step(1, 0, 10))
	tl.engine.Instance = ""
	assert.True(t, tl.step(1, 0, 10), "a step without an instance id matches on host and pid")
}

// Launches that come before their step and kernels that come before their
// launch wait, then land in the right step.
func TestOutOfOrderArrival(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{}), "h", 100, 1, "")
	require.True(t, tl.step(1, 0, 100))
	// The kernel of corr 1 arrives before its launch.
	tl.kernel(1, 1, "attention", 50, 60, false)
	tl.corr = 0
	a := tl.launch(cuptiwire.LaunchKindKernel, 150) // step 2 not known yet
	require.Equal(t, uint32(1), a)
	tl.kernel(a, 1, "attention", 200, 260, false)
	st := tl.w.Stats()
	assert.Equal(t, 1, st.PendingLaunches)
	assert.Equal(t, 2, st.PendingKernels, "both wait: one for its launch, one for the launch's step")
	require.True(t, tl.step(2, 100, 300))
	tl.mark(400)
	got := tl.collect(time.Second)
	assert.Equal(t, MissingNoLaunches, got[1].Missing)
	assert.Equal(t, us(60+10), got[2].Figures.KernelNS, "the kernel that came first and the one after both count")
	assert.Equal(t, uint64(2), got[2].Figures.KernelCount)
	assert.Zero(t, tl.w.Stats().PendingKernels)
}

func TestMissingReasons(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	ok, why := w.AddStep(StepInfo{Engine: EngineKey{Host: "nobody", PID: 1}, LaunchEnd: 1})
	assert.False(t, ok)
	assert.Equal(t, MissingNoSource, why)

	tl := newTimeline(t, w, "h", 100, 1, "")
	require.True(t, tl.step(1, 0, 100))
	require.True(t, tl.step(2, 100, 200))
	require.True(t, tl.step(3, 200, 300))
	a := tl.launch(cuptiwire.LaunchKindKernel, 10)
	tl.launch(cuptiwire.LaunchKindKernel, 150) // its kernel never comes
	c := tl.launch(cuptiwire.LaunchKindKernel, 250)
	tl.launch(cuptiwire.LaunchKindKernel, 260)
	tl.mark(400)
	tl.kernel(a, 1, "attention", 20, 30, false)
	tl.kernel(c, 1, "attention", 260, 270, false)
	// Before the deadline only the complete step is final.
	got := tl.collect(time.Second)
	assert.Len(t, got, 1)
	assert.Equal(t, MissingNone, got[1].Missing)
	got = tl.collect(5 * time.Second)
	require.Len(t, got, 2)
	assert.Equal(t, MissingNoKernels, got[2].Missing)
	assert.Zero(t, got[2].Figures.KernelNS)
	assert.Equal(t, MissingIncomplete, got[3].Missing)
	assert.Equal(t, us(10), got[3].Figures.KernelNS)
}

// A step is not final before the library says every launch of its window
// was sent, nor while records keep coming within Quiet.
func TestStepWaitsForMarkAndQuiet(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{Quiet: 100 * time.Millisecond}), "h", 100, 1, "")
	require.True(t, tl.step(1, 0, 100))
	a := tl.launch(cuptiwire.LaunchKindKernel, 10)
	tl.kernel(a, 1, "attention", 20, 30, false)
	assert.Empty(t, tl.collect(time.Second), "no mark past the step's end yet")
	tl.mark(150)
	tl.kernel(a+1, 1, "attention", 40, 50, false) // unmatched: outside every launch
	assert.Len(t, tl.collect(time.Millisecond), 1)
}

// With the engine thread known, other threads of the engine's process do
// not launch for the step.
func TestOtherThreadsAreNotTheStep(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	tl := newTimeline(t, w, "h", 100, 1, "")
	ok, _ := w.AddStep(StepInfo{Engine: tl.engine, Index: 1, ThreadID: 7, LaunchStart: at(0), LaunchEnd: at(100), Deadline: tl.now.Add(time.Second), Ref: uint64(1)})
	require.True(t, ok)
	own := tl.launch(cuptiwire.LaunchKindKernel, 10) // thread 7
	tl.src.Launches([]cuptiwire.Launch{{Kind: cuptiwire.LaunchKindKernel, Correlation: 50, ThreadID: 8, Time: uint64(at(20))}}, tl.now)
	tl.mark(200)
	tl.kernel(own, 1, "attention", 20, 30, false)
	tl.kernel(50, 1, "attention", 30, 90, false)
	got := tl.collect(time.Second)
	assert.Equal(t, us(10), got[1].Figures.KernelNS)
	assert.Equal(t, uint64(1), w.Stats().KernelsOutside)
}

func TestLinkOutlivesTheStep(t *testing.T) {
	t.Parallel()
	tl := newTimeline(t, New(Config{}), "h", 100, 1, "")
	require.True(t, tl.step(9, 0, 100))
	a := tl.launch(cuptiwire.LaunchKindKernel, 10)
	tl.mark(200)
	tl.kernel(a, 1, "attention", 20, 30, false)
	require.Len(t, tl.collect(time.Second), 1)
	l, ok := tl.src.LinkOf(a)
	require.True(t, ok)
	assert.Equal(t, uint64(9), l.Index)
	tl.kernel(a, 1, "attention", 30, 40, false)
	assert.Equal(t, uint64(1), tl.w.Stats().KernelsLate)
}

func TestBounds(t *testing.T) {
	t.Parallel()
	w := New(Config{MaxPendingLaunches: 2, MaxPendingKernels: 2, MaxSteps: 2, MaxSources: 1})
	tl := newTimeline(t, w, "h", 100, 1, "")
	assert.Nil(t, w.OpenSource(SourceInfo{Host: "h", PID: 5}, testNames))
	for i := range 4 {
		tl.launch(cuptiwire.LaunchKindKernel, int64(i)) // no engine yet: held
	}
	for i := range 4 {
		tl.kernel(uint32(100+i), 1, "gemm", 0, 1, false) // launches not here yet
	}
	st := w.Stats()
	assert.Equal(t, 2, st.PendingLaunches)
	assert.Equal(t, uint64(2), st.LaunchesDropped)
	assert.Equal(t, 2, st.PendingKernels)
	assert.Equal(t, uint64(2), st.KernelsDropped)
	assert.Equal(t, uint64(1), st.SourcesRefused)
	require.True(t, tl.step(1, 0, 10))
	require.True(t, tl.step(2, 10, 20))
	require.True(t, tl.step(3, 20, 30)) // pushes step 1 out early
	got := tl.collect(0)
	require.Contains(t, got, uint64(1))
	assert.Equal(t, MissingEvicted, got[1].Missing)
	assert.Equal(t, uint64(1), w.Stats().StepsEvicted)
}

func TestClosedSourceIsForgotten(t *testing.T) {
	t.Parallel()
	w := New(Config{})
	tl := newTimeline(t, w, "h", 100, 1, "")
	require.True(t, tl.step(1, 0, 10))
	tl.src.Close()
	tl.collect(10 * time.Second)
	assert.Zero(t, w.Stats().Sources)
	ok, why := w.AddStep(StepInfo{Engine: tl.engine, Index: 2, LaunchStart: at(10), LaunchEnd: at(20)})
	assert.False(t, ok)
	assert.Equal(t, MissingNoSource, why)
}
