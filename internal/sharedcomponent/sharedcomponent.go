// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package sharedcomponent lets the exporters a collector builds for each
// signal of one configured component share one instance: one listener, one
// store. It has the API of contrib's internal/sharedcomponent (v0.161.0),
// which cannot be imported from outside contrib: Go refuses an import path
// with an "internal" element from code not rooted at its parent, and core's
// copy (go.opentelemetry.io/collector/internal/sharedcomponent) is internal
// to core the same way. Unlike contrib's, the map takes a lock, so tests may
// build components from several goroutines.
package sharedcomponent // import "github.com/inferprof/inferprof/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Map holds the shared instances, keyed by the component's *Config (the
// collector passes the same pointer for every signal of one component).
type Map[K comparable, V component.Component] struct {
	mu    sync.Mutex
	comps map[K]*Component[V]
}

// NewMap returns an empty Map.
func NewMap[K comparable, V component.Component]() *Map[K, V] {
	return &Map[K, V]{comps: map[K]*Component[V]{}}
}

// LoadOrStore returns the instance held for key, or creates it with create
// and holds it until its Shutdown.
func (m *Map[K, V]) LoadOrStore(key K, create func() (V, error)) (*Component[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.comps[key]; ok {
		return c, nil
	}
	v, err := create()
	if err != nil {
		return nil, err
	}
	c := &Component[V]{component: v}
	c.remove = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.comps[key] == c {
			delete(m.comps, key)
		}
	}
	m.comps[key] = c
	return c, nil
}

// Len is how many instances are held.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.comps)
}

// Component starts its instance once, on the first Start, and shuts it
// down once, on the first Shutdown, which also drops it from its Map: the
// collector shuts every signal's exporter down together.
type Component[V component.Component] struct {
	component V
	startOnce sync.Once
	stopOnce  sync.Once
	startErr  error
	remove    func()
}

// Unwrap returns the instance.
func (c *Component[V]) Unwrap() V { return c.component }

// Start implements component.Component.
func (c *Component[V]) Start(ctx context.Context, host component.Host) error {
	c.startOnce.Do(func() { c.startErr = c.component.Start(ctx, host) })
	return c.startErr
}

// Shutdown implements component.Component; it may be called without Start.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	var err error
	c.stopOnce.Do(func() {
		err = c.component.Shutdown(ctx)
		c.remove()
	})
	return err
}
