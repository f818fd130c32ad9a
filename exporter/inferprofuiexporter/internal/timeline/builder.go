// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import "math"

// Thread ids inside an engine instance's process.
const (
	tidSteps    = 10      // onwards: one per data-parallel engine, more where steps overlap
	tidRequests = 1000000 // + lane
)

// Pid ranges: engine instances first, then GPUs.
const (
	pidEngines = 1
	pidGPUs    = 100000
)

// builder hands events, with times relative to origin, to emit: Render
// collects them, StreamTrace encodes each as it comes, so that a long window
// never exists as one document in memory.
type builder struct {
	origin int64
	emit   func(Event)
}

func (b *builder) us(ns int64) float64 { return float64(ns-b.origin) / 1e3 }

func (b *builder) meta(pid, tid int, name, value string) {
	b.emit(Event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": value}})
}

func (b *builder) sortIndex(pid, tid int, idx int) {
	name := "process_sort_index"
	if tid != 0 {
		name = "thread_sort_index"
	}
	b.emit(Event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"sort_index": idx}})
}

func (b *builder) slice(pid, tid int, name, cat, cname string, start, end int64, args map[string]any) {
	d := float64(end-start) / 1e3
	b.emit(Event{Name: name, Cat: cat, Ph: "X", Ts: b.us(start), Dur: &d, Pid: pid, Tid: tid, Cname: cname, Args: args})
}

func (b *builder) counter(pid int, name string, ts int64, args map[string]any) {
	b.emit(Event{Name: name, Ph: "C", Ts: b.us(ts), Pid: pid, Tid: 0, Args: args})
}

// lanes packs intervals into the fewest rows where none overlap: a
// thread's slices must nest, and concurrent requests do not.
type lanes []int64

func (l *lanes) place(start, end int64) int {
	for i, last := range *l {
		if start >= last {
			(*l)[i] = end
			return i
		}
	}
	*l = append(*l, end)
	return len(*l) - 1
}

func (b *builder) instant(pid, tid int, ts int64, index int) {
	b.emit(Event{Name: "token", Cat: "token", Ph: "i", S: "t", Ts: b.us(ts), Pid: pid, Tid: tid,
		Args: map[string]any{"index": index}})
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }
