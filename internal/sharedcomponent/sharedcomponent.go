// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package sharedcomponent lets the components the collector builds for each
// signal of one config share one instance, started once and shut down once.
//
// It is the shape of contrib's internal/sharedcomponent and core's
// internal/sharedcomponent, which Go's internal rule keeps from us
// (docs/contrib-helpers.md). One difference: the instance is shut down by the
// last user's Shutdown, not the first, because the signals' components do not
// stop together (the nvml receiver's logs scraper still ticks after its
// metrics scraper stopped).
package sharedcomponent // import "github.com/inferprof/inferprof/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// Map holds one shared instance per key, usually the component's *Config.
// A zero Map is not usable; use NewMap.
type Map[K comparable, V component.Component] struct {
	mu      sync.Mutex
	entries map[K]*entry[V]
}

// NewMap returns an empty Map.
func NewMap[K comparable, V component.Component]() *Map[K, V] {
	return &Map[K, V]{entries: map[K]*entry[V]{}}
}

type entry[V component.Component] struct {
	comp  V
	users int // handles not yet shut down; guarded by Map.mu

	mu       sync.Mutex
	started  bool
	startErr error
	host     *host // the host the instance started with; nil before Start
}

// Component is one user's handle on a shared instance. Its Start and
// Shutdown run at most once each; the instance starts with the first
// handle's Start and shuts down with the last handle's Shutdown.
type Component[V component.Component] struct {
	e      *entry[V]
	remove func() bool // drops this handle; true when it was the last

	startOnce, stopOnce sync.Once
	startErr            error
	stopErr             error
}

var _ component.Component = (*Component[component.Component])(nil)

// LoadOrStore returns a new handle on the instance stored under key, first
// creating that instance with create when there is none. Every handle must
// be shut down, started or not, for the instance to be released.
func (m *Map[K, V]) LoadOrStore(key K, create func() (V, error)) (*Component[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		comp, err := create()
		if err != nil {
			return nil, err
		}
		e = &entry[V]{comp: comp}
		m.entries[key] = e
	}
	e.users++
	return &Component[V]{e: e, remove: func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		e.users--
		if e.users > 0 {
			return false
		}
		if m.entries[key] == e {
			delete(m.entries, key)
		}
		return true
	}}, nil
}

// Len is the number of instances held, for tests.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Unwrap returns the shared instance.
func (c *Component[V]) Unwrap() V { return c.e.comp }

// Start starts the shared instance if no handle did; every handle's Start
// then returns that first Start's error. A status the instance reports
// through its host reaches every started handle's host, as each pipeline's
// component has its own.
func (c *Component[V]) Start(ctx context.Context, h component.Host) error {
	c.startOnce.Do(func() {
		c.e.mu.Lock()
		defer c.e.mu.Unlock()
		if !c.e.started {
			c.e.started = true
			c.e.host = &host{Host: h}
			c.e.host.add(h)
			c.e.startErr = c.e.comp.Start(ctx, c.e.host)
		} else {
			c.e.host.add(h)
		}
		c.startErr = c.e.startErr
	})
	return c.startErr
}

// Shutdown releases this handle; the last one shuts the instance down
// (started or not: a component's Shutdown must be safe without Start) and
// forgets its key, so a new pipeline with the same config builds afresh.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	c.stopOnce.Do(func() {
		if !c.remove() {
			return
		}
		c.e.mu.Lock()
		defer c.e.mu.Unlock()
		c.stopErr = c.e.comp.Shutdown(ctx)
	})
	return c.stopErr
}

// host is the host a shared instance starts with: the first handle's, with
// status reports fanned out to every handle's host (core's hostWrapper).
type host struct {
	component.Host

	mu      sync.Mutex
	targets []componentstatus.Reporter
	recent  []*componentstatus.Event // replayed to a handle that starts later
}

var _ componentstatus.Reporter = (*host)(nil)

// keepRecent is how many past events a late handle's host is told.
const keepRecent = 5

func (h *host) add(c component.Host) {
	r, ok := c.(componentstatus.Reporter)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.recent {
		r.Report(e)
	}
	h.targets = append(h.targets, r)
}

func (h *host) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.targets) > 0 {
		h.recent = append(h.recent, e)
		if len(h.recent) > keepRecent {
			h.recent = h.recent[1:]
		}
	}
	for _, r := range h.targets {
		r.Report(e)
	}
}
