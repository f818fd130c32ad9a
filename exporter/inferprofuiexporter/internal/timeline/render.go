// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"math"
	"slices"
)

// Render turns a snapshot into a Chrome trace, in memory; the handler
// streams instead (StreamTrace).
func Render(sn Snapshot) Trace {
	var events []Event
	od := render(sn, func(e Event) { events = append(events, e) })
	if events == nil {
		events = []Event{}
	}
	return Trace{TraceEvents: events, DisplayTimeUnit: "ms", OtherData: od}
}

// render hands sn's events to emit and returns what the trace covers.
func render(sn Snapshot, emit func(Event)) OtherData {
	// ts 0 is the earliest record, so that times stay small and keep
	// sub-microsecond precision as float64.
	origin := int64(math.MaxInt64)
	for _, r := range sn.Requests {
		origin = min(origin, r.Start)
	}
	for _, st := range sn.Steps {
		origin = min(origin, st.Start)
	}
	for _, k := range sn.Kernels {
		origin = min(origin, k.Start)
	}
	for _, sm := range sn.Samples {
		origin = min(origin, sm.TS)
	}
	if origin == math.MaxInt64 {
		origin = sn.From
	}
	b := &builder{origin: origin, emit: emit}
	od := OtherData{
		Producer: "inferprof", OriginUnixNs: origin, FromUnixNs: sn.From, ToUnixNs: sn.To,
		Requests: len(sn.Requests), Steps: len(sn.Steps), Kernels: len(sn.Kernels), Samples: len(sn.Samples),
		KernelsSampled: len(sn.Kernels) > 0,
	}

	// One process per engine instance, in name order.
	instances := map[string]int{}
	var instNames []string
	for _, r := range sn.Requests {
		if _, ok := instances[r.Instance]; !ok {
			instances[r.Instance] = 0
			instNames = append(instNames, r.Instance)
		}
	}
	for _, st := range sn.Steps {
		if _, ok := instances[st.Instance]; !ok {
			instances[st.Instance] = 0
			instNames = append(instNames, st.Instance)
		}
	}
	slices.Sort(instNames)
	for i, n := range instNames {
		pid := pidEngines + i
		instances[n] = pid
		b.meta(pid, 0, "process_name", "engine "+n)
		b.sortIndex(pid, 0, i)
	}

	stepLoc := b.steps(sn.Steps, instances)
	b.requests(sn.Requests, sn.Phases, instances)
	od.Flows = b.gpus(sn, stepLoc)
	return od
}
