// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// The correlation benchmark's timeline: one engine stepping 100 times a
// second, each step launching kernelsPerStep kernels (64 distinct names,
// 10 µs apart on the GPU): 1 M kernel records a second.
const (
	benchStepNS    = 10_000_000
	kernelsPerStep = 10_000
	benchBatch     = 1024 // records per frame, as the library sends them
)

type corrBench struct {
	h       *connHandler
	win     *gpuwindow.Window
	recs    []cuptiwire.Record
	ls      []cuptiwire.Launch
	step    int
	results []gpuwindow.Result
}

func newCorrBench(tb testing.TB, correlate bool) *corrBench {
	tb.Helper()
	mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 30, mb, pcommon.Timestamp(0))
	b := &corrBench{recs: make([]cuptiwire.Record, kernelsPerStep), ls: make([]cuptiwire.Launch, kernelsPerStep+1)}
	h := &connHandler{agg: agg, ctx: context.Background(), now: time.Now}
	if correlate {
		b.win = gpuwindow.New(gpuwindow.Config{})
		h.corr = connCorrelation{c: newCorrelation(b.win)}
	}
	hello := cuptiwire.Hello{PID: 7, Flags: cuptiwire.HelloLaunches, Host: []byte("bench")}
	if err := h.Hello(hello); err != nil {
		tb.Fatal(err)
	}
	if err := h.Identity(cuptiwire.Identity{PPID: 1}); err != nil {
		tb.Fatal(err)
	}
	for i := range 64 {
		if err := h.String(uint32(i+1), []byte(benchName(i))); err != nil {
			tb.Fatal(err)
		}
	}
	b.h = h
	return b
}

// runStep plays one step: its launches and a mark, the step itself, its
// kernels in frames, and a collect; it returns the steps finalized.
func (b *corrBench) runStep(tb testing.TB) int {
	t0 := uint64(1_700_000_000_000_000_000) + uint64(b.step)*benchStepNS
	corr := uint32(b.step * kernelsPerStep)
	for i := range b.recs {
		c := corr + uint32(i) + 1
		launch := t0 + uint64(i)*(benchStepNS/kernelsPerStep)
		b.ls[i] = cuptiwire.Launch{Kind: cuptiwire.LaunchKindKernel, Correlation: c, ThreadID: 7, Time: launch}
		start := launch + 500_000
		b.recs[i] = cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Device: 0, Stream: 7, Start: start, End: start + 900, Name: uint32(1 + i%64), Correlation: c}
	}
	b.ls[kernelsPerStep] = cuptiwire.Launch{Kind: cuptiwire.LaunchKindMark, Time: t0 + benchStepNS}
	b.step++
	if b.win != nil {
		ok, _ := b.win.AddStep(gpuwindow.StepInfo{
			Engine: gpuwindow.EngineKey{Host: "bench", PID: 7}, Index: uint64(b.step),
			LaunchStart: int64(t0), LaunchEnd: int64(t0 + benchStepNS - 1), Deadline: time.Now().Add(time.Minute), Ref: b.step,
		})
		if !ok && b.step > 1 {
			tb.Fatal("the engine has no source")
		}
		if err := b.h.Launches(b.ls); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < len(b.recs); i += benchBatch {
		if err := b.h.Records(b.recs[i:min(i+benchBatch, len(b.recs))]); err != nil {
			tb.Fatal(err)
		}
	}
	if b.win == nil {
		return 1
	}
	b.results = b.win.Collect(time.Now().Add(time.Second), nil, b.results[:0])
	return len(b.results)
}

// BenchmarkCorrelate is the cost per kernel record of tying it to its
// step, on top of what every record costs anyway (impl=aggregate, the
// receiver's sums, the baseline). One op is one step of 10,000 kernels.
func BenchmarkCorrelate(b *testing.B) {
	for _, impl := range []string{"aggregate", "correlate"} {
		b.Run("impl="+impl, func(b *testing.B) {
			cb := newCorrBench(b, impl == "correlate")
			cb.runStep(b) // the first step attaches the source
			b.ReportAllocs()
			b.ResetTimer()
			finalized := 0
			for b.Loop() {
				finalized += cb.runStep(b)
			}
			if finalized < b.N {
				b.Fatalf("%d of %d steps finalized", finalized, b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kernelsPerStep), "ns/record")
			b.ReportMetric(float64(b.N*kernelsPerStep)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkWindowMemory is what the window keeps per second of timeline
// (100 steps, 1 M kernel records) while the steps are not final yet: when
// the steps arrived first (their kernels are summed as they come), and when
// the kernels came before their steps (held until their steps arrive, up
// to MaxPendingKernels). Reported as bytes of heap per second of window.
func BenchmarkWindowMemory(b *testing.B) {
	for _, order := range []string{"steps_first", "kernels_first"} {
		b.Run("order="+order, func(b *testing.B) {
			var perSecond float64
			for b.Loop() {
				perSecond = windowBytesPerSecond(b, order == "kernels_first")
			}
			b.ReportMetric(perSecond, "B/window-s")
		})
	}
}

func windowBytesPerSecond(tb testing.TB, kernelsFirst bool) float64 {
	const steps = 100 // one second
	ks := make([]gpuwindow.Kernel, kernelsPerStep)
	ls := make([]cuptiwire.Launch, kernelsPerStep)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	win := gpuwindow.New(gpuwindow.Config{})
	src := win.OpenSource(gpuwindow.SourceInfo{Host: "bench", PID: 7}, nameList{})
	attn := win.CategoryID("attention")
	addStep := func(s int) {
		t0 := uint64(1_700_000_000_000_000_000) + uint64(s)*benchStepNS
		win.AddStep(gpuwindow.StepInfo{Engine: gpuwindow.EngineKey{Host: "bench", PID: 7}, Index: uint64(s + 1),
			LaunchStart: int64(t0), LaunchEnd: int64(t0 + benchStepNS - 1), Deadline: time.Now().Add(time.Hour)})
	}
	// Kernels first: the steps' datagrams have not come, and everything
	// waits for them.
	for s := range steps {
		if !kernelsFirst {
			addStep(s)
		}
		t0 := uint64(1_700_000_000_000_000_000) + uint64(s)*benchStepNS
		for i := range ks {
			c := uint32(s*kernelsPerStep + i + 1)
			launch := t0 + uint64(i)*(benchStepNS/kernelsPerStep)
			ls[i] = cuptiwire.Launch{Kind: cuptiwire.LaunchKindKernel, Correlation: c, Time: launch}
			ks[i] = gpuwindow.Kernel{Correlation: c, Start: launch + 500_000, End: launch + 500_900, Series: uint32(i % 64), Category: attn}
		}
		src.Launches(ls, time.Now())
		src.Kernels(ks, time.Now())
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(win)
	runtime.KeepAlive(ks)
	runtime.KeepAlive(ls)
	if st := win.Stats(); kernelsFirst && st.PendingKernels == 0 || !kernelsFirst && st.PendingSteps != steps {
		tb.Fatalf("unexpected window state %+v", st)
	}
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

type nameList struct{}

func (nameList) KernelName(s uint32) string { return fmt.Sprint(s) }
