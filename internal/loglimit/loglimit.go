// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package loglimit rate-limits repeated warnings: the first of each kind is
// logged, then at most one per interval, and the line that is logged says
// how many were held back.
//
// zap's sampler (zapcore.NewSamplerWithOptions) drops lines the same way but
// cannot tell the next line how many it dropped, which our warnings report
// (similar_suppressed, suppressed_since_last); where no count is wanted the
// components use zap's sampler.
package loglimit // import "github.com/inferprof/inferprof/internal/loglimit"

import (
	"sync"
	"time"
)

// Limiter holds the state of each kind of warning. Callers keep the kinds a
// fixed set (event names, bounded reasons), so its map stays small. It is
// safe for concurrent use.
type Limiter struct {
	every time.Duration

	mu    sync.Mutex
	kinds map[string]*kind
}

type kind struct {
	last       time.Time
	suppressed int
}

// New returns a Limiter that lets one warning of a kind through per every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, kinds: map[string]*kind{}}
}

// Every is the interval between two warnings of one kind.
func (l *Limiter) Every() time.Duration { return l.every }

// Allow reports whether a warning of kind may be logged at now and, when it
// may, how many of that kind were held back since the last one logged.
func (l *Limiter) Allow(name string, now time.Time) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[name]
	if k == nil {
		k = &kind{}
		l.kinds[name] = k
	} else if now.Sub(k.last) < l.every {
		k.suppressed++
		return 0, false
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	return n, true
}

// Reset forgets kind, so its next warning is logged at once: a run of
// failures ended.
func (l *Limiter) Reset(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.kinds, name)
}
