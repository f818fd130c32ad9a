// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package ticker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTicksWithTheClockUntilStopped(t *testing.T) {
	var l Loop
	at := time.Unix(1767225600, 0)
	var calls atomic.Int64
	seen := make(chan time.Time, 100)
	l.Start(time.Millisecond, func() time.Time { return at }, func(_ context.Context, now time.Time) {
		calls.Add(1)
		select {
		case seen <- now:
		default:
		}
	})
	require.Equal(t, at, <-seen, "fn gets the clock's time")
	l.Stop()
	n := calls.Load()
	// After Stop returns no call is running or starts: a second Stop waits
	// for nothing and the count stays.
	l.Stop()
	assert.Equal(t, n, calls.Load())
}

func TestStopWithoutStart(t *testing.T) {
	var l Loop
	l.Stop() // must not block or panic
}

func TestStopWaitsForARunningCall(t *testing.T) {
	var l Loop
	entered := make(chan struct{})
	var once, done atomic.Bool
	l.Start(time.Millisecond, time.Now, func(ctx context.Context, _ time.Time) {
		if once.Swap(true) {
			return
		}
		close(entered)
		<-ctx.Done() // Stop cancels, then must wait for the rest of this call
		done.Store(true)
	})
	<-entered
	l.Stop()
	assert.True(t, done.Load(), "Stop returned before the call in progress did")
}

func TestPeriodIsAQuarterOfTheShortestWait(t *testing.T) {
	for _, tc := range []struct {
		name  string
		waits []time.Duration
		want  time.Duration
	}{
		{"no waits", nil, time.Second},
		{"only unset waits", []time.Duration{0, -time.Second}, time.Second},
		{"a long wait keeps the second", []time.Duration{10 * time.Second}, time.Second},
		{"a quarter of the wait", []time.Duration{2 * time.Second}, 500 * time.Millisecond},
		{"the shortest wait set wins", []time.Duration{0, 2 * time.Second, 400 * time.Millisecond}, 100 * time.Millisecond},
		{"at least a millisecond", []time.Duration{time.Microsecond}, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Period(tc.waits...))
		})
	}
}
