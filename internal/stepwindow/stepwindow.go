// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepwindow keeps a bounded, time-indexed window of recent engine
// steps per engine instance and rebuilds a request's token timestamps, and so
// its inter-token latency, from the ends of the steps that gave it tokens.
//
// Request spans arrive after their request finished while steps stream in as
// it runs, so the window must still hold a request's steps when its span
// arrives. When it no longer does, Lookup says so (StatusEvicted) rather than
// guess. A Window is safe for concurrent use.
//
//go:generate go tool mdatagen metadata.yaml
package stepwindow // import "github.com/inferprof/inferprof/internal/stepwindow"

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/inferprof/inferprof/internal/stepwindow/internal/metadata"
)

// Config bounds a Window. Zero fields take the defaults from NewDefaultConfig.
type Config struct {
	// MaxAge evicts steps that ended this long before the newest step of
	// their instance. Default 5m.
	MaxAge time.Duration
	// MaxSteps caps the steps kept per instance. Default 120000 (10 minutes at
	// 200 steps/s).
	MaxSteps int
	// MaxRecords caps the (request, step) token records kept across all
	// instances, the window's main memory cost (about 42 bytes each); the
	// oldest steps go first. Default 2,000,000 (about 85 MB).
	MaxRecords int
	// MaxInstances caps the engine windows tracked, one per (service
	// instance, engine); the one updated least recently goes first.
	// Default 256.
	MaxInstances int
	// MaxSources caps the step sources (engine processes) remembered per
	// engine window. A source whose last step has left the window is forgotten
	// anyway; past the cap the one heard least recently goes first and is
	// counted. Default 1024.
	MaxSources int
	// StallFactor counts a gap as a stall when it exceeds StallFactor times
	// the request's median gap. Default 3.
	StallFactor float64
}

// NewDefaultConfig returns the default bounds.
func NewDefaultConfig() Config {
	return Config{
		MaxAge:       5 * time.Minute,
		MaxSteps:     120_000,
		MaxRecords:   2_000_000,
		MaxInstances: 256,
		MaxSources:   1024,
		StallFactor:  3,
	}
}

func (c Config) withDefaults() Config {
	d := NewDefaultConfig()
	if c.MaxAge <= 0 {
		c.MaxAge = d.MaxAge
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = d.MaxSteps
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = d.MaxRecords
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = d.MaxInstances
	}
	if c.MaxSources <= 0 {
		c.MaxSources = d.MaxSources
	}
	if c.StallFactor <= 0 {
		c.StallFactor = d.StallFactor
	}
	return c
}

// Step is one engine step as the window needs it. See FromSpan.
type Step struct {
	// Engine identifies the engine (host and engine index) within its
	// service instance: each gets its own window. A restarted engine
	// process keeps its engine and is a new Source.
	Engine uint64
	// Source identifies the process that numbered Index (pid and engine
	// index); several sources may feed one engine window.
	Source uint64
	// Index is the step's number in its source, from 1. A jump marks lost
	// steps, which make the requests they overlap incomplete.
	Index uint64
	// StartUnixNs and EndUnixNs bound the step; tokens count as produced at
	// its end.
	StartUnixNs int64
	EndUnixNs   int64
	// RequestIDs got RequestTokens[i] tokens each in this step.
	RequestIDs    []string
	RequestTokens []int64
	// Truncated marks a step whose request id list the hook cut short.
	Truncated bool
}

// Status says how far a Result can be trusted.
type Status int

const (
	// StatusOK means the window covered the whole request.
	StatusOK Status = iota
	// StatusNoSteps means the window covers the request's time but holds no
	// token for it (unknown id, or no step data for that instance yet).
	StatusNoSteps
	// StatusEvicted means steps from the request's lifetime already left the
	// window, or were never seen (the window started after the request
	// arrived); no figures are given.
	StatusEvicted
	// StatusIncomplete means steps were lost or truncated while the request
	// ran; the figures cover the tokens seen and may overstate gaps.
	StatusIncomplete
	// StatusUnknownInstance means no step of the instance was ever seen.
	StatusUnknownInstance
)

// String returns the status as used in span attributes.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusNoSteps:
		return "no_steps"
	case StatusEvicted:
		return "evicted"
	case StatusIncomplete:
		return "incomplete"
	case StatusUnknownInstance:
		return "unknown_instance"
	default:
		return "unknown"
	}
}

// Result is a request's inter-token latency rebuilt from steps.
type Result struct {
	Status Status
	// Tokens is the number of tokens the steps gave the request.
	Tokens int
	// TokenSteps is the number of steps that gave it tokens.
	TokenSteps int
	// Gaps holds the time between consecutive token steps, in seconds; one
	// per step after the first, as `vllm bench serve` counts ITL per chunk.
	Gaps []float64
	// P50, P99 and Max summarise Gaps (nearest-rank percentiles); zero when
	// Gaps is empty.
	P50, P99, Max float64
	// DecodeSteps is len(Gaps): the steps after the first token.
	DecodeSteps int
	// Stalls counts gaps above StallFactor times P50.
	Stalls int
	// GPU is the request's share of its steps' GPU time (gpu.go).
	GPU RequestGPU
}

// Stats are the window's counters.
type Stats struct {
	// Instances counts the service instances (or, without an instance id,
	// service names) with steps; Engines their engine windows.
	Instances    int
	Engines      int
	Steps        int
	Records      int
	EvictedSteps uint64 // steps that left the window for age or size
	// EvictedInstances counts engine windows dropped at MaxInstances.
	EvictedInstances uint64
	// Sources is the number of step sources remembered, all instances.
	Sources int
	// EvictedSources counts sources forgotten at MaxSources while their
	// last step was still in the window.
	EvictedSources uint64
}

// Window is the set of per-engine step windows, grouped by the service
// instance they serve (see InstanceKey).
type Window struct {
	mu               sync.Mutex
	cfg              Config
	groups           map[groupKey]*group
	engines          map[engineKey]*instance
	records          int
	evictedSteps     uint64
	evictedInstances uint64
	evictedSources   uint64
	tick             uint64 // orders instance updates for LRU eviction
	telemetry        *metadata.TelemetryBuilder
}

// New returns an empty window with cfg's bounds.
func New(cfg Config) *Window {
	return &Window{cfg: cfg.withDefaults(), groups: map[groupKey]*group{}, engines: map[engineKey]*instance{}}
}

// groupKey names the steps of one service instance: its
// service.instance.id (byID) or, for engines without one, its service.name.
type groupKey struct {
	byID bool
	name string
}

func groupOf(id, service string) groupKey {
	if id != "" {
		return groupKey{byID: true, name: id}
	}
	return groupKey{name: service}
}

// group holds the engine windows of one service instance.
type group struct{ engines []*instance }

type engineKey struct {
	group  groupKey
	engine uint64
}

// instance is the window of one engine of a service instance.
type instance struct {
	key      engineKey
	steps    []stepRec // ring buffer, oldest at head
	head     int
	n        int
	nextSeq  uint64 // seq of the next step added; seq of steps[head] is nextSeq-n
	requests map[string]*track
	// evictedEnd is the end of the newest evicted step: a request that
	// arrived after it has all its steps in the window.
	evictedEnd int64
	// firstStart is the start of the first step the instance received: the
	// window has seen every source's steps since then.
	firstStart int64
	sources    map[uint64]source // last step seen per source
	flaws      []flaw            // flawed steps still in the window, oldest first
	used       uint64
}

type stepRec struct {
	start, end int64
	touched    []*track // requests that got tokens here, to trim on eviction
	tokens     int64    // tokens the step gave, all requests
	gpu        *GPU     // the step's GPU figures (gpu.go); nil: none yet
	gpuPending bool     // the figures are still being gathered
}

// source is the last step seen from one process.
type source struct {
	index uint64
	end   int64
}

// flaw is a step that was truncated or came after lost steps.
type flaw struct{ start, end int64 }

type track struct {
	id   string
	recs []tokenRec // in step order
}

type tokenRec struct {
	seq    uint64
	tokens int64
}

// Add appends step s to its engine's window in service instance key (see
// InstanceKey and FromSpan) and evicts what the bounds require. Steps of one
// source must arrive in order; late ones are dropped.
func (w *Window) Add(key string, s *Step) {
	w.AddRef(key, s)
}

// AddRef is Add returning a reference to the step, for SetGPU; ok is false
// when the step was dropped.
func (w *Window) AddRef(key string, s *Step) (ref Ref, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, service := splitKey(key)
	ek := engineKey{group: groupOf(id, service), engine: s.Engine}
	in := w.engines[ek]
	if in == nil {
		if len(w.engines) >= w.cfg.MaxInstances {
			w.evictInstanceLocked()
		}
		in = &instance{
			key:        ek,
			steps:      make([]stepRec, 0, 64),
			requests:   map[string]*track{},
			sources:    map[uint64]source{},
			firstStart: s.StartUnixNs,
		}
		w.engines[ek] = in
		g := w.groups[ek.group]
		if g == nil {
			g = &group{}
			w.groups[ek.group] = g
		}
		g.engines = append(g.engines, in)
	}
	w.tick++
	in.used = w.tick
	flawed := s.Truncated
	flawStart := s.StartUnixNs
	if last, found := in.sources[s.Source]; found {
		if s.Index <= last.index {
			return Ref{}, false
		}
		if s.Index != last.index+1 {
			// The lost steps ran between the previous step and this one.
			flawed = true
			flawStart = last.end
		}
	} else {
		if s.Index > 1 {
			// The source ran before the window saw the instance (the
			// collector started late, or the instance was evicted): its
			// earlier steps are as good as evicted for requests that
			// arrived before then. A source the window forgot since (see
			// addSourceLocked) stepped only before the window's oldest
			// step, so the window still covers what came after.
			in.evictedEnd = max(in.evictedEnd, in.firstStart)
		}
		w.addSourceLocked(in)
	}
	in.sources[s.Source] = source{index: s.Index, end: s.EndUnixNs}

	if in.n == w.cfg.MaxSteps {
		w.evictOldestLocked(in)
	}
	slot := w.slotLocked(in)
	touched := slot.touched[:0] // reuse the evicted step's slice when the ring wraps
	seq := in.nextSeq
	var total int64
	for i, id := range s.RequestIDs {
		tok := int64(1)
		if i < len(s.RequestTokens) {
			tok = s.RequestTokens[i]
		}
		if tok <= 0 {
			continue
		}
		t := in.requests[id]
		if t == nil {
			t = &track{id: id}
			in.requests[id] = t
		}
		t.recs = append(t.recs, tokenRec{seq: seq, tokens: tok})
		touched = append(touched, t)
		total += tok
	}
	*slot = stepRec{start: s.StartUnixNs, end: s.EndUnixNs, touched: touched, tokens: total}
	in.nextSeq++
	if flawed {
		if len(in.flaws) >= w.cfg.MaxSteps {
			in.flaws = in.flaws[1:]
		}
		in.flaws = append(in.flaws, flaw{flawStart, s.EndUnixNs})
	}
	w.records += len(touched)

	for in.n > 0 && in.steps[in.head].end < s.EndUnixNs-int64(w.cfg.MaxAge) {
		w.evictOldestLocked(in)
	}
	for w.records > w.cfg.MaxRecords {
		w.evictGlobalOldestLocked()
	}
	return Ref{in: in, seq: seq}, true
}

// addSourceLocked makes room for a new source: it forgets sources whose
// last step has left the window (their processes are most likely gone) and,
// if the instance still holds MaxSources, the one heard least recently. It
// scans the sources, but only when a new one appears.
func (w *Window) addSourceLocked(in *instance) {
	if len(in.sources) == 0 {
		return
	}
	for k, src := range in.sources {
		if src.end <= in.evictedEnd {
			delete(in.sources, k)
		}
	}
	for len(in.sources) >= w.cfg.MaxSources {
		var oldest uint64
		end := int64(math.MaxInt64)
		for k, src := range in.sources {
			if src.end < end {
				oldest, end = k, src.end
			}
		}
		delete(in.sources, oldest)
		w.evictedSources++
	}
}

// slotLocked returns the ring slot for a new step and counts it.
func (w *Window) slotLocked(in *instance) *stepRec {
	if in.n == len(in.steps) {
		if len(in.steps) < w.cfg.MaxSteps {
			// Grow: unroll the ring so head is 0, then append.
			if in.head != 0 {
				in.steps = slices.Concat(in.steps[in.head:], in.steps[:in.head])
				in.head = 0
			}
			in.steps = append(in.steps, stepRec{})
			in.n++
			return &in.steps[len(in.steps)-1]
		}
	}
	i := (in.head + in.n) % len(in.steps)
	in.n++
	return &in.steps[i]
}

// evictOldestLocked drops the instance's oldest step and its token records.
func (w *Window) evictOldestLocked(in *instance) {
	st := &in.steps[in.head]
	seq := in.nextSeq - uint64(in.n)
	for _, t := range st.touched {
		// The oldest record of every touched track is this step's.
		if len(t.recs) > 0 && t.recs[0].seq == seq {
			t.recs = t.recs[1:]
			w.records--
		}
		if len(t.recs) == 0 {
			delete(in.requests, t.id)
		}
	}
	clear(st.touched)
	in.evictedEnd = max(in.evictedEnd, st.end)
	for len(in.flaws) > 0 && in.flaws[0].end <= in.evictedEnd {
		in.flaws = in.flaws[1:]
	}
	in.head = (in.head + 1) % len(in.steps)
	in.n--
	w.evictedSteps++
}

func (w *Window) evictGlobalOldestLocked() {
	var oldest *instance
	for _, in := range w.engines {
		if in.n > 0 && (oldest == nil || in.steps[in.head].end < oldest.steps[oldest.head].end) {
			oldest = in
		}
	}
	if oldest == nil {
		w.records = 0
		return
	}
	w.evictOldestLocked(oldest)
}

func (w *Window) evictInstanceLocked() {
	var lru *instance
	for _, in := range w.engines {
		if lru == nil || in.used < lru.used {
			lru = in
		}
	}
	if lru == nil {
		return
	}
	for _, t := range lru.requests {
		w.records -= len(t.recs)
	}
	w.evictedSteps += uint64(lru.n)
	delete(w.engines, lru.key)
	g := w.groups[lru.key.group]
	g.engines = slices.DeleteFunc(g.engines, func(in *instance) bool { return in == lru })
	if len(g.engines) == 0 {
		delete(w.groups, lru.key.group)
	}
	w.evictedInstances++
}

// Stats returns the window's sizes and eviction counters.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{
		Instances:        len(w.groups),
		Engines:          len(w.engines),
		Records:          w.records,
		EvictedSteps:     w.evictedSteps,
		EvictedInstances: w.evictedInstances,
		EvictedSources:   w.evictedSources,
	}
	for _, in := range w.engines {
		s.Steps += in.n
		s.Sources += len(in.sources)
	}
	return s
}
