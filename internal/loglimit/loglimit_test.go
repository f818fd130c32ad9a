// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package loglimit

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFirstThenOnePerInterval(t *testing.T) {
	l := New(time.Second)
	now := time.Unix(100, 0)
	n, ok := l.Allow("bad", now)
	assert.True(t, ok, "the first of a kind is logged")
	assert.Zero(t, n)
	for i := 1; i <= 3; i++ {
		_, ok = l.Allow("bad", now.Add(time.Duration(i)*200*time.Millisecond))
		assert.False(t, ok)
	}
	n, ok = l.Allow("other", now.Add(300*time.Millisecond))
	assert.True(t, ok, "kinds are limited apart")
	assert.Zero(t, n)
	n, ok = l.Allow("bad", now.Add(time.Second))
	assert.True(t, ok, "one interval after the last logged")
	assert.Equal(t, 3, n, "and it says how many were held back")
	_, ok = l.Allow("bad", now.Add(1500*time.Millisecond))
	assert.False(t, ok)
	assert.Equal(t, time.Second, l.Every())
}

func TestReset(t *testing.T) {
	l := New(time.Minute)
	now := time.Unix(100, 0)
	_, _ = l.Allow("upload", now)
	_, ok := l.Allow("upload", now.Add(time.Second))
	assert.False(t, ok)
	l.Reset("upload")
	n, ok := l.Allow("upload", now.Add(2*time.Second))
	assert.True(t, ok, "a new run of failures is logged at once")
	assert.Zero(t, n, "the held-back count went with the old run")
}

func TestConcurrentAllow(t *testing.T) {
	l := New(time.Hour)
	now := time.Unix(100, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 16 {
		wg.Go(func() {
			if _, ok := l.Allow("k", now); ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, allowed)
	n, ok := l.Allow("k", now.Add(time.Hour))
	assert.True(t, ok)
	assert.Equal(t, 15, n)
}
