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
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
)

type counting struct {
	mu             sync.Mutex
	starts, stops  int
	startErr       error
	stoppedStarted bool // Shutdown ran after a Start
}

func (c *counting) Start(context.Context, component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts++
	return c.startErr
}

func (c *counting) Shutdown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops++
	c.stoppedStarted = c.starts > 0
	return nil
}

type cfg struct{ name string }

func TestOneInstancePerKeyStartedOnceStoppedByLast(t *testing.T) {
	m := NewMap[*cfg, *counting]()
	key, other := &cfg{"a"}, &cfg{"a"} // equal contents, two configs
	created := 0
	create := func() (*counting, error) { created++; return &counting{}, nil }

	metrics, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	logs, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	alone, err := m.LoadOrStore(other, create)
	require.NoError(t, err)
	assert.Equal(t, 2, created, "one instance per key, keyed by identity")
	assert.Same(t, metrics.Unwrap(), logs.Unwrap())
	assert.NotSame(t, metrics.Unwrap(), alone.Unwrap())
	assert.Equal(t, 2, m.Len())

	host := componenttest.NewNopHost()
	require.NoError(t, metrics.Start(t.Context(), host))
	require.NoError(t, metrics.Start(t.Context(), host), "a handle starts once")
	require.NoError(t, logs.Start(t.Context(), host))
	inst := metrics.Unwrap()
	assert.Equal(t, 1, inst.starts)

	require.NoError(t, metrics.Shutdown(t.Context()))
	require.NoError(t, metrics.Shutdown(t.Context()), "a handle shuts down once")
	assert.Equal(t, 0, inst.stops, "the logs handle still uses it")
	require.NoError(t, logs.Shutdown(t.Context()))
	assert.Equal(t, 1, inst.stops)
	assert.True(t, inst.stoppedStarted)
	assert.Equal(t, 1, m.Len(), "the key is forgotten; the other config's instance stays")

	again, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	assert.NotSame(t, inst, again.Unwrap(), "after the last Shutdown the same config builds afresh")
	require.NoError(t, again.Shutdown(t.Context()))
	require.NoError(t, alone.Shutdown(t.Context()))
	assert.Equal(t, 1, alone.Unwrap().stops, "shut down without Start, as the collector does after a failed start")
	assert.Equal(t, 0, m.Len())
}

func TestStartErrorReachesEveryHandle(t *testing.T) {
	m := NewMap[*cfg, *counting]()
	key := &cfg{}
	boom := errors.New("listen: address in use")
	create := func() (*counting, error) { return &counting{startErr: boom}, nil }
	a, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	b, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	require.ErrorIs(t, a.Start(t.Context(), componenttest.NewNopHost()), boom)
	require.ErrorIs(t, b.Start(t.Context(), componenttest.NewNopHost()), boom, "the second pipeline gets the same error")
	assert.Equal(t, 1, a.Unwrap().starts)
}

func TestCreateErrorStoresNothing(t *testing.T) {
	m := NewMap[*cfg, *counting]()
	boom := errors.New("bad config")
	_, err := m.LoadOrStore(&cfg{}, func() (*counting, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, m.Len())
}

func TestConcurrentHandles(t *testing.T) {
	m := NewMap[*cfg, *counting]()
	key := &cfg{}
	var created sync.WaitGroup
	handles := make(chan *Component[*counting], 8)
	for range 8 {
		created.Go(func() {
			h, err := m.LoadOrStore(key, func() (*counting, error) { return &counting{}, nil })
			assert.NoError(t, err)
			assert.NoError(t, h.Start(t.Context(), componenttest.NewNopHost()))
			handles <- h
		})
	}
	created.Wait()
	close(handles)
	var inst *counting
	var stopped sync.WaitGroup
	for h := range handles {
		if inst == nil {
			inst = h.Unwrap()
		}
		assert.Same(t, inst, h.Unwrap())
		stopped.Go(func() { assert.NoError(t, h.Shutdown(t.Context())) })
	}
	stopped.Wait()
	assert.Equal(t, 1, inst.starts)
	assert.Equal(t, 1, inst.stops)
	assert.Equal(t, 0, m.Len())
}

// reportingHost is a pipeline's host that records the status it is told.
type reportingHost struct {
	component.Host
	mu     sync.Mutex
	events []componentstatus.Status
}

func (h *reportingHost) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e.Status())
}

func (h *reportingHost) statuses() []componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]componentstatus.Status(nil), h.events...)
}

// hostKeeper is an instance that reports status through the host it started with.
type hostKeeper struct {
	counting
	host component.Host
}

func (k *hostKeeper) Start(ctx context.Context, h component.Host) error {
	k.host = h
	return k.counting.Start(ctx, h)
}

func TestStatusReachesEveryPipeline(t *testing.T) {
	m := NewMap[*cfg, *hostKeeper]()
	key := &cfg{}
	create := func() (*hostKeeper, error) { return &hostKeeper{}, nil }
	a, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	b, err := m.LoadOrStore(key, create)
	require.NoError(t, err)
	ha := &reportingHost{Host: componenttest.NewNopHost()}
	hb := &reportingHost{Host: componenttest.NewNopHost()}

	require.NoError(t, a.Start(t.Context(), ha))
	componentstatus.ReportStatus(a.Unwrap().host, componentstatus.NewRecoverableErrorEvent(errors.New("accept: too many open files")))
	require.NoError(t, b.Start(t.Context(), hb))
	componentstatus.ReportStatus(a.Unwrap().host, componentstatus.NewEvent(componentstatus.StatusOK))

	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, ha.statuses())
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, hb.statuses(),
		"the later pipeline is told the earlier event, then the new one")
	assert.Equal(t, 1, a.Unwrap().starts)
	require.NoError(t, a.Shutdown(t.Context()))
	require.NoError(t, b.Shutdown(t.Context()))
}
