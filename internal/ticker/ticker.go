// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package ticker is the background loop of the processors that hold spans
// (step_figures' GPU join, inference's SGLang join, agent_run's assembly):
// one goroutine that releases what is due on a period, with a context of its
// own (not Start's), stopped and waited for at shutdown before the final
// drain, so nothing is released twice or after the drain.
package ticker // import "github.com/inferprof/inferprof/internal/ticker"

import (
	"context"
	"sync"
	"time"
)

// Period is how often held spans are checked against their waits: a few
// times per wait, so a held span is late by a quarter of its wait at most,
// and at least once a second. A wait of 0 or less holds nothing and is
// passed over.
func Period(waits ...time.Duration) time.Duration {
	tick := time.Second
	for _, w := range waits {
		if w > 0 {
			tick = min(tick, max(w/4, time.Millisecond))
		}
	}
	return tick
}

// Loop runs one function on a period. The zero value is ready; Stop is safe
// without Start, and more than once.
type Loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start calls fn every d with the time now gives, until Stop. now is read at
// each tick, so a test that swaps the clock after Start is followed.
func (l *Loop) Start(d time.Duration, now func() time.Time, fn func(context.Context, time.Time)) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx, now())
			}
		}
	})
}

// Stop ends the loop and waits until a call of fn in progress returns.
func (l *Loop) Stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}
