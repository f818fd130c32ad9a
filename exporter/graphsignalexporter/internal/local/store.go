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
	"github.com/inferprof/inferprof/internal/bucketquantile"
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

// Signals is the /signals document (Graphsignal reference §6). Fields
// ending in _ns are epoch nanoseconds, _ts epoch seconds; null means not
// measured, 0 a measured zero.
type Signals struct {
	Profiler  Profiler          `json:"profiler"`
	PayloadNs int64             `json:"payload_ns"`
	StartNs   int64             `json:"start_ns"`
	Context   map[string]string `json:"context"`
	Metrics   []Metric          `json:"metrics"`
	Errors    []Error           `json:"errors"`
	Resources []Resource        `json:"resources"`
}

// Profiler names what produced the document.
type Profiler struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Metric is one series; Stats depends on Type.
type Metric struct {
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	Tags      map[string]string `json:"tags"`
	Stats     any               `json:"stats"`
	UpdatedNs int64             `json:"updated_ns"`
}

// GaugeStats is a gauge's latest value.
type GaugeStats struct {
	Value float64 `json:"value"`
}

// CounterStats is a counter's total since start_ns.
type CounterStats struct {
	Total float64 `json:"total"`
}

// QuantileMethod labels the percentiles in /signals of a histogram without
// an exponential twin: they are estimates, interpolated linearly inside the
// histogram bucket that holds the quantile, not exact percentiles of the
// recorded values.
const QuantileMethod = bucketquantile.Method

// HistogramStats summarises a histogram since start_ns. The percentiles
// are estimates, by QuantileMethod or, where the connector keeps an
// exponential twin, QuantileMethodExponential, within RelativeError of the
// exact nearest-rank percentile. The exact percentile lies within P50Bucket
// / P95Bucket, [lower, upper]. A bound is null where the data does not tell
// it (no min below the first bucket; no max above the last, whose overflow
// Graphsignal's format folds in); RelativeError is null for bucket
// interpolation, whose error only the bucket bounds it. Quantiles are null
// without bins.
type HistogramStats struct {
	Count          *int64      `json:"count"`
	Sum            *float64    `json:"sum"`
	Min            *float64    `json:"min"`
	Max            *float64    `json:"max"`
	Mean           *float64    `json:"mean"`
	P50            *float64    `json:"p50"`
	P90            *float64    `json:"p90"`
	P95            *float64    `json:"p95"`
	P99            *float64    `json:"p99"`
	QuantileMethod string      `json:"quantile_method"`
	RelativeError  *float64    `json:"relative_error"`
	P50Bucket      [2]*float64 `json:"p50_bucket"`
	P95Bucket      [2]*float64 `json:"p95_bucket"`
	// Bins and Counts are the bins (upper bounds, ascending) and their
	// counts since start_ns, as graphsignal 1.1.2 serves them so a reader
	// can diff two snapshots; null without bins.
	Bins   []float64 `json:"bins"`
	Counts []int64   `json:"counts"`
}

// ProfileStats lists frames by value, largest first.
type ProfileStats struct {
	Frames []Frame `json:"frames"`
}

// Frame is one profile frame's totals since start_ns.
type Frame struct {
	Name    string `json:"name"`
	Value   uint64 `json:"value"`
	Samples uint64 `json:"samples"`
}

// Error is a recent log entry at warning level or above. Exception is
// null when the entry has none, as graphsignal 1.1.2's LogStore keeps it.
type Error struct {
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Exception *string           `json:"exception"`
	Tags      map[string]string `json:"tags"`
	LogNs     int64             `json:"log_ns"`
}

// Resource is a host, process or device seen recently. Its times are
// whole epoch seconds, as graphsignal 1.1.2 serves them (ns // 1e9).
type Resource struct {
	Kind        string            `json:"kind"`
	Tags        map[string]string `json:"tags"`
	Attributes  map[string]string `json:"attributes"`
	FirstSeenTs int64             `json:"first_seen_ts"`
	LastSeenTs  int64             `json:"last_seen_ts"`
}

// Snapshot returns the current document.
func (s *Store) Snapshot() Signals {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.expire(now)
	out := Signals{
		Profiler:  Profiler{Name: "inferprof", Version: s.version},
		PayloadNs: now,
		StartNs:   s.start,
		Context:   s.context,
		Metrics:   make([]Metric, 0, len(s.series)),
		Errors:    slices.Clone(s.errors),
		Resources: make([]Resource, 0, len(s.resources)),
	}
	if out.Errors == nil {
		out.Errors = []Error{}
	}
	for _, se := range s.series {
		out.Metrics = append(out.Metrics, se.metric())
	}
	slices.SortFunc(out.Metrics, func(a, b Metric) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(tagString(a.Tags), tagString(b.Tags))
	})
	for _, r := range s.resources {
		out.Resources = append(out.Resources, Resource{
			Kind: r.kind, Tags: r.tags, Attributes: r.attrs,
			FirstSeenTs: r.first / 1e9, LastSeenTs: r.last / 1e9,
		})
	}
	slices.SortFunc(out.Resources, func(a, b Resource) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(tagString(a.Tags), tagString(b.Tags))
	})
	return out
}

func tagString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + m[k] + ";")
	}
	return b.String()
}

func (se *series) metric() Metric {
	m := Metric{Name: se.name, Tags: se.tags, UpdatedNs: se.updated}
	switch se.typ {
	case signalsv1.Metric_GAUGE_METRIC:
		m.Type, m.Stats = "gauge", GaugeStats{Value: se.gauge}
	case signalsv1.Metric_COUNTER_METRIC:
		m.Type, m.Stats = "counter", CounterStats{Total: se.total}
	case signalsv1.Metric_HISTOGRAM_METRIC:
		m.Type, m.Stats = "histogram", se.hist.stats()
	case signalsv1.Metric_PROFILE_METRIC:
		ps := ProfileStats{Frames: make([]Frame, 0, len(se.frames))}
		for _, f := range se.frames {
			ps.Frames = append(ps.Frames, Frame{Name: f.name, Value: f.value, Samples: f.samples})
		}
		slices.SortFunc(ps.Frames, func(a, b Frame) int {
			if a.Value != b.Value {
				if a.Value > b.Value {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
		m.Type, m.Stats = "profile", ps
	default:
		m.Type = "undefined"
	}
	return m
}

func (h *histogram) stats() HistogramStats {
	st := HistogramStats{QuantileMethod: QuantileMethod}
	if h == nil {
		return st
	}
	if h.hasCount {
		c := h.count
		st.Count = &c
	}
	if h.hasSum {
		s := h.sum
		st.Sum = &s
		if h.hasCount && h.count > 0 {
			mean := h.sum / float64(h.count)
			st.Mean = &mean
		}
	}
	st.Min, st.Max = h.min, h.max
	if len(h.bins) > 0 {
		st.Bins = make([]float64, 0, len(h.bins))
		for b := range h.bins {
			st.Bins = append(st.Bins, b)
		}
		slices.Sort(st.Bins)
		st.Counts = make([]int64, len(st.Bins))
		for i, b := range st.Bins {
			st.Counts[i] = h.bins[b]
		}
	}
	st.P50, st.P50Bucket = h.quantile(0.50)
	st.P90, _ = h.quantile(0.90)
	st.P95, st.P95Bucket = h.quantile(0.95)
	st.P99, _ = h.quantile(0.99)
	if h.exp != nil && h.exp.Count() > 0 {
		h.expStats(&st)
	}
	return st
}

func (h *histogram) quantile(q float64) (*float64, [2]*float64) {
	return bucketquantile.Quantile(h.bins, h.min, h.max, q)
}

func ptr(v float64) *float64 { return &v }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
