// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package encode maps OTLP data, already turned into deltas, to Graphsignal's
// wire messages: metrics and logs to the v1 UploadRequest, spans to the v0
// one.
package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"sync"
	"time"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// Stats counts what an encoding changed or left out.
type Stats struct {
	Truncated    int // tag keys or values cut to Graphsignal's limits
	Skipped      int // datapoints with no Graphsignal mapping
	FramesFolded int // profile frames counted in "other" past the frame cap
}

// Encoder maps OTLP to Graphsignal messages. Its state is what Graphsignal's
// own client keeps between uploads: when each resource was first seen, the
// process tree, the frames each profile has named so far.
type Encoder struct {
	global []kv
	now    func() time.Time
	names  Names
	rules  map[string][]*rule

	mu        sync.Mutex
	resources map[string]int64               // first seen, epoch ns
	frames    map[uint64]map[string]struct{} // named frames per profile series
	parents   map[procKey]string             // process.parent_pid per process
	memTotal  map[string]string              // device.uuid → mem_total
	buses     map[string]string              // device.uuid → device.bus_id
}

// Bounds on the encoder's state; past them, first_seen is the upload's
// time, profiles cap their frames per upload only, and root pids and
// mem_total are not looked up.
const (
	maxResources     = 10000
	maxProfileSeries = 10000
	maxProcesses     = 10000
	maxDevices       = 1024
)

// Option configures an Encoder.
type Option func(*Encoder)

// WithNames picks the names signals are encoded under; the default is
// NamesSource.
func WithNames(n Names) Option {
	return func(e *Encoder) {
		e.names = n
		if n == NamesGraphsignal {
			e.rules = graphsignalRules
		}
	}
}

// New returns an encoder adding env tags, config tags (winning over env)
// and instance.id to every signal.
func New(envTags, cfgTags map[string]string, instanceID string, now func() time.Time, opts ...Option) *Encoder {
	e := &Encoder{
		global:    globalTags(envTags, cfgTags, instanceID),
		now:       now,
		names:     NamesSource,
		rules:     sourceRules,
		resources: map[string]int64{},
		frames:    map[uint64]map[string]struct{}{},
		parents:   map[procKey]string{},
		memTotal:  map[string]string{},
		buses:     map[string]string{},
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// GlobalTags returns the tags every signal carries, sorted by key.
func (e *Encoder) GlobalTags() []*signalsv1.Tag {
	t := tagSet{kvs: e.global}
	return t.v1Tags()
}

func (e *Encoder) graphsignal() bool { return e.names == NamesGraphsignal }

type procKey struct{ host, service, pid string }
