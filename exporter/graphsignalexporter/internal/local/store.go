// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package local keeps the signals the exporter would upload and serves them
// as JSON on GET /signals, in the shape of Graphsignal's local endpoint, so
// people, scripts and coding agents can read them without an account.
package local // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"

import (
	"slices"
	"strings"
	"sync"
	"time"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/exphist"
)

const (
	// MaxSeries caps the metrics held, as Graphsignal's MAX_METRICS does.
	MaxSeries = 5000
	// Expiry forgets a metric not updated for this long.
	Expiry = 10 * time.Minute
	// maxErrors is how many recent warnings and errors are kept.
	maxErrors    = 10
	maxResources = 1000
)

type histogram struct {
	bins     map[float64]int64
	count    int64
	sum      float64
	min, max *float64
	hasCount bool
	hasSum   bool
	exp      *exphist.Histogram // the exponential twin's values (exponential.go)
}

type frame struct {
	name           string
	value, samples uint64
}

type series struct {
	name    string
	typ     signalsv1.Metric_MetricType
	tags    map[string]string
	updated int64
	gauge   float64
	total   float64
	hist    *histogram
	frames  map[uint64]*frame
}

type resource struct {
	kind        string
	tags        map[string]string
	attrs       map[string]string
	first, last int64 // ns
}

// Store accumulates uploads: counters, histogram bins and profile frames
// add up since start; gauges keep their latest value.
type Store struct {
	mu        sync.Mutex
	start     int64
	version   string
	context   map[string]string
	series    map[string]*series
	errors    []Error
	resources map[string]*resource
	now       func() time.Time
}

// New returns an empty store; context holds the tags every signal carries.
func New(version string, context []*signalsv1.Tag, now func() time.Time) *Store {
	return &Store{
		start:     now().UnixNano(),
		version:   version,
		context:   tagMap(context),
		series:    map[string]*series{},
		resources: map[string]*resource{},
		now:       now,
	}
}

func tagMap(tags []*signalsv1.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.GetKey()] = t.GetValue()
	}
	return m
}

func tagKey(kind string, tags []*signalsv1.Tag) string {
	var b strings.Builder
	b.WriteString(kind)
	for _, t := range tags {
		b.WriteByte(0)
		b.WriteString(t.GetKey())
		b.WriteByte(0)
		b.WriteString(t.GetValue())
	}
	return b.String()
}

// Apply adds one upload's signals. It returns how many new series were
// refused because MaxSeries are held.
func (s *Store) Apply(req *signalsv1.UploadRequest) (dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.expire(now)
	for _, m := range req.GetMetrics() {
		key := tagKey(m.GetType().String()+"\x00"+m.GetName(), m.GetTags())
		se, ok := s.series[key]
		if !ok {
			if len(s.series) >= MaxSeries {
				dropped++
				continue
			}
			se = &series{name: m.GetName(), typ: m.GetType(), tags: tagMap(m.GetTags())}
			s.series[key] = se
		}
		se.updated = now
		names := map[uint64]string{}
		for _, f := range m.GetFrames() {
			names[f.GetFrameId()] = f.GetName()
		}
		for _, dp := range m.GetDatapoints() {
			se.add(dp, names)
		}
	}
	for _, lb := range req.GetLogBatches() {
		for _, e := range lb.GetLogEntries() {
			if e.GetLevel() < signalsv1.LogEntry_WARNING_LEVEL {
				continue
			}
			s.errors = append(s.errors, Error{
				Level:     levelName(e.GetLevel()),
				Message:   e.GetMessage(),
				Exception: nonEmpty(e.GetException()),
				Tags:      tagMap(lb.GetTags()),
				LogNs:     e.GetLogTs(),
			})
		}
	}
	if n := len(s.errors); n > maxErrors {
		s.errors = slices.Clone(s.errors[n-maxErrors:])
	}
	for _, r := range req.GetResources() {
		key := tagKey(r.GetKind(), r.GetTags())
		res, ok := s.resources[key]
		if !ok {
			if len(s.resources) >= maxResources {
				continue
			}
			res = &resource{kind: r.GetKind(), tags: tagMap(r.GetTags()), first: r.GetFirstSeenTs()}
			s.resources[key] = res
		}
		res.last = max(res.last, r.GetLastSeenTs())
		res.attrs = map[string]string{}
		for _, a := range r.GetAttributes() {
			res.attrs[a.GetName()] = a.GetValue()
		}
	}
	return dropped
}

func (s *Store) expire(now int64) {
	cutoff := now - int64(Expiry)
	for k, se := range s.series {
		if se.updated < cutoff {
			delete(s.series, k)
		}
	}
	for k, r := range s.resources {
		if r.last < cutoff {
			delete(s.resources, k)
		}
	}
}

func (se *series) add(dp *signalsv1.DataPoint, names map[uint64]string) {
	switch v := dp.GetValue().(type) {
	case *signalsv1.DataPoint_Gauge:
		se.gauge = v.Gauge
	case *signalsv1.DataPoint_Total:
		se.total += v.Total
	case *signalsv1.DataPoint_Histogram_:
		h := se.hist
		if h == nil {
			h = &histogram{bins: map[float64]int64{}}
			se.hist = h
		}
		for i, b := range v.Histogram.GetBins() {
			if i < len(v.Histogram.GetCounts()) {
				h.bins[b] += v.Histogram.GetCounts()[i]
			}
		}
		if v.Histogram.Count != nil {
			h.count += v.Histogram.GetCount()
			h.hasCount = true
		}
		if v.Histogram.Sum != nil {
			h.sum += v.Histogram.GetSum()
			h.hasSum = true
		}
		// min and max are lifetime values already.
		if v.Histogram.Min != nil {
			m := v.Histogram.GetMin()
			h.min = &m
		}
		if v.Histogram.Max != nil {
			m := v.Histogram.GetMax()
			h.max = &m
		}
	case *signalsv1.DataPoint_Profile_:
		if se.frames == nil {
			se.frames = map[uint64]*frame{}
		}
		p := v.Profile
		for i, id := range p.GetFrameIds() {
			f, ok := se.frames[id]
			if !ok {
				f = &frame{name: names[id]}
				se.frames[id] = f
			}
			if i < len(p.GetValues()) {
				f.value += p.GetValues()[i]
			}
			if i < len(p.GetSamples()) {
				f.samples += p.GetSamples()[i]
			}
		}
	}
}

func levelName(l signalsv1.LogEntry_LogLevel) string {
	switch l {
	case signalsv1.LogEntry_CRITICAL_LEVEL:
		return "critical"
	case signalsv1.LogEntry_ERROR_LEVEL:
		return "error"
	case signalsv1.LogEntry_WARNING_LEVEL:
		return "warning"
	case signalsv1.LogEntry_INFO_LEVEL:
		return "info"
	case signalsv1.LogEntry_DEBUG_LEVEL:
		return "debug"
	case signalsv1.LogEntry_TRACE_LEVEL:
		return "trace"
	}
	return "unspecified"
}

func ptr(v float64) *float64 { return &v }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
