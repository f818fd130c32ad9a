// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTimelineOneTrackPerInstance feeds two replicas of one service.name
// (each its own service.instance.id, process and GPU, as inferprof-run
// starts them) into one store: the timeline must draw two engine process
// tracks, each with exactly its own steps, requests, phases and tokens, and
// flows from each replica's steps to its own GPU's kernels only.
func TestTimelineOneTrackPerInstance(t *testing.T) {
	replicas := []fixture{replica("replica-a", 1, "0"), replica("replica-b", 2, "1")}
	require.Equal(t, replicas[0].service, replicas[1].service, "one service.name")
	s := New(64<<20, time.Hour, func() time.Time { return base.Add(5 * time.Second) })
	for _, f := range replicas {
		bad, evicted := s.ConsumeTraces(f.traces(t))
		require.Zero(t, bad)
		require.Zero(t, evicted)
	}

	tr := getTrace(t, s, "last=60s")
	checkStructure(t, tr)

	pidOf := map[string]float64{} // process name -> pid
	for _, e := range tr.TraceEvents {
		if e.str("ph") == "M" && e.str("name") == "process_name" {
			pidOf[e.args()["name"].(string)] = e.num("pid")
		}
	}
	type drawn struct {
		requests, steps []string
		phases, tokens  int
		flowsTo         map[float64]int // GPU pid -> flows from this track
	}
	got := map[float64]*drawn{}
	want := map[float64]*drawn{}
	gpuPid := map[float64]float64{} // engine pid -> its replica's GPU pid
	for _, f := range replicas {
		name := "engine " + f.service + " [" + f.instance + "]"
		pid, ok := pidOf[name]
		require.Truef(t, ok, "a process track %q in %v", name, slices.Collect(maps.Keys(pidOf)))
		gpu, ok := pidOf["GPU gpu-node-1/"+f.kernels[0].device]
		require.Truef(t, ok, "replica %s's GPU drawn", f.instance)
		gpuPid[pid] = gpu
		w := &drawn{flowsTo: map[float64]int{}}
		for _, r := range f.requests {
			w.requests = append(w.requests, r.id)
			w.phases += 3
			w.tokens += len(r.steps)
		}
		for _, st := range f.steps {
			w.steps = append(w.steps, strconv.FormatInt(st.index, 10))
		}
		for _, k := range f.kernels {
			if k.step >= 0 {
				w.flowsTo[gpu]++
			}
		}
		want[pid] = w
		got[pid] = &drawn{flowsTo: map[float64]int{}}
	}
	engines := 0
	for name := range pidOf {
		if len(name) > 7 && name[:7] == "engine " {
			engines++
		}
	}
	require.Equal(t, 2, engines, "one process track per engine instance: %v", slices.Collect(maps.Keys(pidOf)))

	starts := map[string]rawEvent{}
	for _, e := range tr.TraceEvents {
		if e.str("ph") == "s" {
			starts[e.str("id")] = e
		}
	}
	for _, e := range tr.TraceEvents {
		pid := e.num("pid")
		switch {
		case e.str("ph") == "X" && e.str("cat") == "request":
			require.Containsf(t, got, pid, "request %v on an engine track", e.args()["request_id"])
			got[pid].requests = append(got[pid].requests, e.args()["request_id"].(string))
		case e.str("ph") == "X" && e.str("cat") == "engine.step":
			require.Containsf(t, got, pid, "step %v on an engine track", e.args()["step"])
			got[pid].steps = append(got[pid].steps, strconv.FormatFloat(e.args()["step"].(float64), 'f', -1, 64))
		case e.str("ph") == "X" && e.str("cat") == "phase":
			got[pid].phases++
		case e.str("ph") == "i":
			got[pid].tokens++
		case e.str("ph") == "f":
			from, ok := starts[e.str("id")]
			require.Truef(t, ok, "flow %s starts somewhere", e.str("id"))
			require.Containsf(t, got, from.num("pid"), "flow %s starts on an engine track", e.str("id"))
			got[from.num("pid")].flowsTo[pid]++
		}
	}
	for pid, w := range want {
		g := got[pid]
		assert.ElementsMatchf(t, w.requests, g.requests, "pid %v requests", pid)
		assert.ElementsMatchf(t, w.steps, g.steps, "pid %v steps", pid)
		assert.Equalf(t, w.phases, g.phases, "pid %v phases", pid)
		assert.Equalf(t, w.tokens, g.tokens, "pid %v token instants", pid)
		assert.Equalf(t, w.flowsTo, g.flowsTo, "pid %v flows go to its own GPU (%v) only", pid, gpuPid[pid])
	}
}
