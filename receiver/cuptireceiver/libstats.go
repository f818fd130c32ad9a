// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"sync"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// maxLibraries bounds the libraries whose counters are remembered; engines
// that come and go leave entries behind until then.
const maxLibraries = 4096

// libraryKey names one load of the injection library: its process, host
// and start time (a restarted engine with a reused pid is another load).
type libraryKey struct {
	host  string
	pid   uint32
	start uint64
}

// libraryStats remembers the cumulative counters each library last sent.
// Stats frames carry totals since the library loaded, so a library that
// reconnects after a dropped connection must count from what it said
// before, not from zero, or its drops are counted twice.
type libraryStats struct {
	mu sync.Mutex
	m  map[libraryKey]cuptiwire.Stats
}

// last and store do nothing on a nil libraryStats (a handler built alone,
// as benchmarks build one).
func (l *libraryStats) last(k libraryKey) cuptiwire.Stats {
	if l == nil {
		return cuptiwire.Stats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[k]
}

func (l *libraryStats) store(k libraryKey, s cuptiwire.Stats) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[libraryKey]cuptiwire.Stats{}
	}
	if _, ok := l.m[k]; !ok && len(l.m) >= maxLibraries {
		for old := range l.m { // any one: a long-gone engine most likely
			delete(l.m, old)
			break
		}
	}
	l.m[k] = s
}
