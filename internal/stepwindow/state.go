// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"sync"

	"github.com/inferprof/inferprof/internal/stepwindow/internal/metadata"
)

// Window is the set of per-engine step windows, grouped by the service
// instance they serve (see InstanceKey).
type Window struct {
	mu               sync.Mutex
	cfg              Config
	groups           map[groupKey]*group
	engines          map[engineKey]*instance
	records          int
	evictedSteps     uint64
	evictedInstances uint64
	evictedSources   uint64
	tick             uint64 // orders instance updates for LRU eviction
	telemetry        *metadata.TelemetryBuilder
}

// New returns an empty window with cfg's bounds.
func New(cfg Config) *Window {
	return &Window{cfg: cfg.withDefaults(), groups: map[groupKey]*group{}, engines: map[engineKey]*instance{}}
}

// groupKey names the steps of one service instance: its
// service.instance.id (byID) or, for engines without one, its service.name.
type groupKey struct {
	byID bool
	name string
}

func groupOf(id, service string) groupKey {
	if id != "" {
		return groupKey{byID: true, name: id}
	}
	return groupKey{name: service}
}

// group holds the engine windows of one service instance.
type group struct{ engines []*instance }

type engineKey struct {
	group  groupKey
	engine uint64
}

// instance is the window of one engine of a service instance.
type instance struct {
	key      engineKey
	steps    []stepRec // ring buffer, oldest at head
	head     int
	n        int
	nextSeq  uint64 // seq of the next step added; seq of steps[head] is nextSeq-n
	requests map[string]*track
	// evictedEnd is the end of the newest evicted step: a request that
	// arrived after it has all its steps in the window.
	evictedEnd int64
	// firstStart is the start of the first step the instance received: the
	// window has seen every source's steps since then.
	firstStart int64
	sources    map[uint64]source // last step seen per source
	flaws      []flaw            // flawed steps still in the window, oldest first
	used       uint64
}

type stepRec struct {
	start, end int64
	touched    []*track // requests that got tokens here, to trim on eviction
	tokens     int64    // tokens the step gave, all requests
	gpu        *GPU     // the step's GPU figures (gpu.go); nil: none yet
	gpuPending bool     // the figures are still being gathered
}

// source is the last step seen from one process.
type source struct {
	index uint64
	end   int64
}

// flaw is a step that was truncated or came after lost steps.
type flaw struct{ start, end int64 }

type track struct {
	id   string
	recs []tokenRec // in step order
}

type tokenRec struct {
	seq    uint64
	tokens int64
}

// Ref names a step added with AddRef, for SetGPU. A Ref outlives its step:
// SetGPU on a step the window evicted does nothing.
type Ref struct {
	in  *instance
	seq uint64
}
