// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
)

// graphSeries stands for a whole CUDA graph launch (the library's graph
// mode), which has no kernel name.
const graphSeries = ^uint32(0)

// seriesResolver names kernel series for the correlation window.
type seriesResolver struct{ agg *aggregate.Aggregator }

func (s seriesResolver) KernelName(series uint32) string {
	if series == graphSeries {
		return aggregate.GraphLaunchName
	}
	return s.agg.KernelName(series)
}

// correlation is the receiver's side of the correlation window: the
// sources it opened, for kernel-span links, and its telemetry options.
type correlation struct {
	win     *gpuwindow.Window
	mu      sync.Mutex
	sources map[uint32]*gpuwindow.Source // by aggregator source
	reason  map[string][]metric.AddOption
}

func newCorrelation(win *gpuwindow.Window) *correlation {
	c := &correlation{win: win, sources: map[uint32]*gpuwindow.Source{}, reason: map[string][]metric.AddOption{}}
	for _, r := range []string{"outside", "unmatched", "late", "launch", "kernel", "engine_launch"} {
		c.reason[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))}
	}
	return c
}

// link finds the engine step that launched a sampled kernel.
func (c *correlation) link(src, corr uint32) (aggregate.StepLink, bool) {
	c.mu.Lock()
	s := c.sources[src]
	c.mu.Unlock()
	l, ok := s.LinkOf(corr)
	return aggregate.StepLink{TraceID: l.TraceID, SpanID: l.SpanID, Index: l.Index}, ok
}

// connCorrelation is one connection's state for the window.
type connCorrelation struct {
	c         *correlation
	src       *gpuwindow.Source // nil until the first launches frame
	ppid      uint32
	instance  string
	seriesCat []uint8 // aggregator series → window category id + 1; 0 not looked up yet
	graphCat  uint8
	kbuf      []gpuwindow.Kernel
	counts    gpuwindow.Counts // already reported
}
