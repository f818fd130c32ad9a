// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package sharedcomponent

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

type counting struct {
	starts, stops int
	startErr      error
}

func (c *counting) Start(context.Context, component.Host) error { c.starts++; return c.startErr }
func (c *counting) Shutdown(context.Context) error              { c.stops++; return nil }

type key struct{ name string }

// TestOnePerKey: one instance per key, started and stopped once however
// many signals start and stop it, and forgotten after Shutdown, so the
// next LoadOrStore (a collector reload) builds a fresh one.
func TestOnePerKey(t *testing.T) {
	m := NewMap[*key, *counting]()
	a, b := &key{"a"}, &key{"a"}
	created := 0
	mk := func() (*counting, error) { created++; return &counting{}, nil }
	s1, err := m.LoadOrStore(a, mk)
	require.NoError(t, err)
	s2, err := m.LoadOrStore(a, mk)
	require.NoError(t, err)
	assert.Same(t, s1, s2)
	other, err := m.LoadOrStore(b, mk)
	require.NoError(t, err)
	assert.NotSame(t, s1, other, "equal configs of two components are two keys")
	assert.Equal(t, 2, created)
	assert.Equal(t, 2, m.Len())

	host := componenttest.NewNopHost()
	require.NoError(t, s1.Start(t.Context(), host))
	require.NoError(t, s2.Start(t.Context(), host))
	assert.Equal(t, 1, s1.Unwrap().starts)
	require.NoError(t, s1.Shutdown(context.Background()))
	require.NoError(t, s2.Shutdown(context.Background()))
	assert.Equal(t, 1, s1.Unwrap().stops)
	assert.Equal(t, 1, m.Len(), "a's instance is forgotten, b's kept")

	s3, err := m.LoadOrStore(a, mk)
	require.NoError(t, err)
	assert.NotSame(t, s1, s3)
	assert.Equal(t, 3, created)
}

// TestErrors: a failed create holds nothing; a failed Start is returned
// to every signal that starts it, not only the first.
func TestErrors(t *testing.T) {
	m := NewMap[*key, *counting]()
	k := &key{}
	_, err := m.LoadOrStore(k, func() (*counting, error) { return nil, errors.New("boom") })
	require.EqualError(t, err, "boom")
	assert.Equal(t, 0, m.Len())

	bad := errors.New("address in use")
	s, err := m.LoadOrStore(k, func() (*counting, error) { return &counting{startErr: bad}, nil })
	require.NoError(t, err)
	require.ErrorIs(t, s.Start(t.Context(), componenttest.NewNopHost()), bad)
	require.ErrorIs(t, s.Start(t.Context(), componenttest.NewNopHost()), bad)
	assert.Equal(t, 1, s.Unwrap().starts)
	require.NoError(t, s.Shutdown(context.Background()), "shutdown without a successful start")
	assert.Equal(t, 1, s.Unwrap().stops)
}

// TestConcurrentLoadOrStore: factories built from several goroutines (as
// tests do) still get one instance per key.
func TestConcurrentLoadOrStore(t *testing.T) {
	m := NewMap[*key, *counting]()
	k := &key{}
	var wg sync.WaitGroup
	got := make([]*Component[*counting], 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.LoadOrStore(k, func() (*counting, error) { return &counting{}, nil })
			assert.NoError(t, err)
			got[i] = s
		}()
	}
	wg.Wait()
	for _, s := range got {
		assert.Same(t, got[0], s)
	}
}
