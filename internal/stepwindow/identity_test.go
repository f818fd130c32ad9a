// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// on places a step on an engine (host, engine index).
func on(host string, index int64, s *Step) *Step {
	s.Engine = hashOf(host, 0, index, false)
	s.Source = hashOf(host, 1, index, true)
	return s
}

// TestReplicasWithOneServiceNameStayApart: two replicas of "vllm", each with
// its own service.instance.id, serve requests with the same ids (a client
// that numbers its requests) on different timings. Each request span finds
// its own replica's steps.
func TestReplicasWithOneServiceNameStayApart(t *testing.T) {
	w := New(Config{})
	a, b := joinKey("inst-a", "vllm"), joinKey("inst-b", "vllm")
	w.Add(a, on("h", 0, step(1, 0, 10, "r1")))
	w.Add(b, on("h", 0, step(1, 0, 7, "r1")))
	w.Add(a, on("h", 0, step(2, 10, 20, "r1")))
	w.Add(b, on("h", 0, step(2, 7, 50, "r1")))
	w.Add(a, on("h", 0, step(3, 20, 30, "r1")))

	ra := w.Lookup(a, "r1", at(-1), at(40))
	rb := w.Lookup(b, "r1", at(-1), at(60))
	require.Equal(t, StatusOK, ra.Status)
	require.Equal(t, StatusOK, rb.Status)
	assert.InDeltaSlice(t, []float64{0.010, 0.010}, ra.Gaps, 1e-9)
	assert.InDeltaSlice(t, []float64{0.043}, rb.Gaps, 1e-9)
	assert.Equal(t, Stats{Instances: 2, Engines: 2, Steps: 5, Records: 5, Sources: 2}, w.Stats())

	// Keyed on service.name alone (what the window did before, and what it
	// does without instance ids), the replicas' processes are two sources
	// of one engine, and r1's tokens of both merge: gaps that neither had.
	m := New(Config{})
	k := joinKey("", "vllm")
	for i, st := range []*Step{step(1, 0, 10, "r1"), step(1, 0, 7, "r1"), step(2, 10, 20, "r1"), step(2, 7, 50, "r1"), step(3, 20, 30, "r1")} {
		st = on("h", 0, st)
		st.Source += uint64(i % 2)
		m.Add(k, st)
	}
	assert.InDeltaSlice(t, []float64{-0.003, 0.013, 0.030, -0.020}, m.Lookup(k, "r1", at(-1), at(60)).Gaps, 1e-9,
		"negative gaps: the two replicas interleave")
}

// TestEnginesOfOneInstanceHaveTheirOwnWindows: data-parallel engines of
// one server share its instance id; steps lost on engine 0 do not make a
// request on engine 1 incomplete, and a request on either is found by id.
func TestEnginesOfOneInstanceHaveTheirOwnWindows(t *testing.T) {
	w := New(Config{})
	k := joinKey("inst", "vllm")
	w.Add(k, on("h", 0, step(1, 0, 10, "e0")))
	w.Add(k, on("h", 0, step(5, 10, 20, "e0"))) // steps 2-4 lost on engine 0
	w.Add(k, on("h", 1, step(1, 0, 12, "e1")))
	w.Add(k, on("h", 1, step(2, 12, 24, "e1")))

	assert.Equal(t, StatusIncomplete, w.Lookup(k, "e0", at(-1), at(30)).Status)
	r := w.Lookup(k, "e1", at(-1), at(30))
	assert.Equal(t, StatusOK, r.Status, "engine 1 lost nothing")
	assert.InDeltaSlice(t, []float64{0.012}, r.Gaps, 1e-9)
	assert.Equal(t, StatusNoSteps, w.Lookup(k, "nobody", at(-1), at(30)).Status)
	st := w.Stats()
	assert.Equal(t, 1, st.Instances)
	assert.Equal(t, 2, st.Engines)
}

// TestWithoutAnInstanceIDEnginesAreFoundByRequest: no launcher, two
// replicas of one service.name on two hosts, each engine in its own window
// (service.name, host, engine index). A request is found in the engine that
// holds its id; when both hold it, in the one whose tokens fall within the
// request's life.
func TestWithoutAnInstanceIDEnginesAreFoundByRequest(t *testing.T) {
	w := New(Config{})
	k := joinKey("", "vllm")
	w.Add(k, on("h1", 0, step(1, 0, 10, "r", "only1")))
	w.Add(k, on("h1", 0, step(2, 10, 20, "r", "only1")))
	w.Add(k, on("h2", 0, step(1, 100, 130, "r")))
	w.Add(k, on("h2", 0, step(2, 130, 160, "r")))

	assert.InDeltaSlice(t, []float64{0.030}, w.Lookup(k, "r", at(90), at(200)).Gaps, 1e-9,
		"the engine whose tokens fall within the request")
	assert.InDeltaSlice(t, []float64{0.010}, w.Lookup(k, "r", at(-1), at(50)).Gaps, 1e-9)
	assert.InDeltaSlice(t, []float64{0.010}, w.Lookup(k, "only1", at(-1), at(200)).Gaps, 1e-9)
	assert.Equal(t, 2, w.Stats().Engines, "one window per host")
	assert.Equal(t, 1, w.Stats().Instances, "one service name")
}

// TestInstanceIDFallsBackToServiceName: request spans carry the launcher's
// instance id, but the engine's hook sent none (an older hook): the steps
// are found under the service.name.
func TestInstanceIDFallsBackToServiceName(t *testing.T) {
	w := New(Config{})
	w.Add(joinKey("", "vllm"), on("h", 0, step(1, 0, 10, "r")))
	w.Add(joinKey("", "vllm"), on("h", 0, step(2, 10, 25, "r")))
	r := w.Lookup(joinKey("inst", "vllm"), "r", at(-1), at(30))
	assert.Equal(t, StatusOK, r.Status)
	assert.InDeltaSlice(t, []float64{0.015}, r.Gaps, 1e-9)
	assert.Equal(t, StatusUnknownInstance, w.Lookup(joinKey("inst", "sglang"), "r", at(-1), at(30)).Status)
}

func TestEvictedEngineWindowLeavesItsInstance(t *testing.T) {
	w := New(Config{MaxInstances: 1})
	k := joinKey("inst", "vllm")
	w.Add(k, on("h", 0, step(1, 0, 10, "a")))
	w.Add(k, on("h", 1, step(1, 5, 15, "b"))) // evicts engine 0's window
	assert.Equal(t, StatusNoSteps, w.Lookup(k, "a", at(20), at(30)).Status)
	assert.Equal(t, StatusOK, w.Lookup(k, "b", at(-1), at(30)).Status)
	w.Add(joinKey("other", "vllm"), on("h", 0, step(1, 0, 10, "c")))
	assert.Equal(t, StatusUnknownInstance, w.Lookup(k, "b", at(-1), at(30)).Status, "its last engine went")
	st := w.Stats()
	assert.Equal(t, Stats{Instances: 1, Engines: 1, Steps: 1, Records: 1, Sources: 1, EvictedSteps: 2, EvictedInstances: 2}, st)
}

func TestStatsAreReportedAsTelemetry(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	w := New(Config{MaxInstances: 1})
	require.NoError(t, w.RegisterTelemetry(tel.NewTelemetrySettings()))
	k := joinKey("inst", "vllm")
	w.Add(k, on("h", 0, step(1, 0, 10, "a", "b")))
	w.Add(k, on("h", 1, step(1, 5, 15, "c"))) // evicts engine 0's window

	get := func(name string) int64 {
		m, err := tel.GetMetric("otelcol_processor_inference_step_window_" + name)
		require.NoError(t, err, name)
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			return d.DataPoints[0].Value
		case metricdata.Sum[int64]:
			return d.DataPoints[0].Value
		}
		t.Fatalf("%s: %T", name, m.Data)
		return 0
	}
	st := w.Stats()
	assert.Equal(t, int64(st.Instances), get("instances"))
	assert.Equal(t, int64(1), get("engines"))
	assert.Equal(t, int64(1), get("steps"))
	assert.Equal(t, int64(1), get("records"))
	assert.Equal(t, int64(1), get("sources"))
	assert.Equal(t, int64(1), get("evicted_engines"))
	assert.Equal(t, int64(1), get("evicted_steps"))
	assert.Equal(t, int64(0), get("evicted_sources"))

	w.Close()
	w.Close()
	_, err := tel.GetMetric("otelcol_processor_inference_step_window_engines")
	assert.Error(t, err, "nothing reported after Close")
	var none *Window
	none.Close()
}
