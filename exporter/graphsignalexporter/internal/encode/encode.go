// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package encode maps OTLP data, already turned into deltas, to Graphsignal's
// wire messages: metrics and logs to the v1 UploadRequest, spans to the v0
// one.
package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

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

type metricKey struct {
	name string
	typ  signalsv1.Metric_MetricType
	tags uint64
}

type profileKey struct {
	name string
	tags uint64
}

type profileFrame struct {
	value, samples float64
}

type profileAcc struct {
	key    profileKey
	tags   []*signalsv1.Tag
	ts     int64
	order  []string
	frames map[string]*profileFrame
	mode   bool // also send cuda_graph_trace_mode
}

type metricsBuilder struct {
	e        *Encoder
	req      *signalsv1.UploadRequest
	metrics  map[metricKey]*signalsv1.Metric
	profiles map[profileKey]*profileAcc
	profOrd  []profileKey
	res      *resourceBuilder
	tags     tagSet
	base     []kv // global and resource tags of the current resource
	st       Stats
}

// Metrics encodes md, which must hold deltas (see package delta): gauges,
// monotonic delta sums and delta histograms.
func (e *Encoder) Metrics(md pmetric.Metrics) (*signalsv1.UploadRequest, Stats) {
	now := e.now().UnixNano()
	b := &metricsBuilder{
		e:        e,
		req:      &signalsv1.UploadRequest{UploadTs: now},
		metrics:  map[metricKey]*signalsv1.Metric{},
		profiles: map[profileKey]*profileAcc{},
		res:      e.newResourceBuilder(now),
	}
	b.tags.cache = map[kv]*signalsv1.Tag{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := rm.Resource().Attributes()
		b.res.add(res)
		b.setResource(res)
		if mode, ok := res.Get(attrGraphMode); ok && e.graphsignal() && rm.ScopeMetrics().Len() > 0 {
			b.graphMode(mode.AsString())
		}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			scope := sms.At(j).Scope().Name()
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				b.metric(res, scope, ms.At(k))
			}
		}
	}
	b.flushProfiles()
	b.req.Resources = b.res.finish()
	b.st.Truncated += b.tags.truncated
	return b.req, b.st
}

// ts is a point's time, or the upload's when the point has none.
func (b *metricsBuilder) ts(t pcommon.Timestamp) int64 {
	if t == 0 {
		return b.req.UploadTs
	}
	return int64(t)
}

// startTags builds a datapoint's tag set: the resource's (computed once per
// resource) and the datapoint's attributes.
func (b *metricsBuilder) startTags(attrs pcommon.Map, skip func(string) bool) uint64 {
	b.tags.kvs = append(b.tags.kvs[:0], b.base...)
	b.tags.putMap(attrs, skip)
	if b.e.graphsignal() {
		b.tags.rename(false)
	}
	return b.tags.finish()
}

// setResource computes the tags every datapoint of a resource shares.
func (b *metricsBuilder) setResource(res pcommon.Map) {
	b.tags.reset(b.e.global)
	b.tags.putMap(res, notResourceTag)
	if b.e.graphsignal() {
		b.tags.rename(true)
	}
	b.base = append(b.base[:0], b.tags.kvs...)
}

func (b *metricsBuilder) get(name string, typ signalsv1.Metric_MetricType, tagKey uint64) *signalsv1.Metric {
	k := metricKey{name, typ, tagKey}
	m, ok := b.metrics[k]
	if !ok {
		m = &signalsv1.Metric{Name: clean(name), Type: typ, Tags: b.tags.v1Tags()}
		b.metrics[k] = m
		b.req.Metrics = append(b.req.Metrics, m)
	}
	return m
}

func (b *metricsBuilder) metric(res pcommon.Map, scope string, m pmetric.Metric) {
	if rules := b.e.rules[m.Name()]; rules != nil {
		b.mapped(res, m, rules)
		return
	}
	b.unmapped(res, scope, m)
}

// unmapped encodes m under its own name (for the prometheus receiver's
// metrics, the name Graphsignal's Prometheus import gives them).
func (b *metricsBuilder) unmapped(res pcommon.Map, scope string, m pmetric.Metric) {
	name, skip := m.Name(), func(string) bool { return false }
	if b.e.graphsignal() && scope == prometheusScope {
		name = promName(name, m.Type() == pmetric.MetricTypeSum && m.Sum().IsMonotonic())
		skip = func(k string) bool { return promStripped[k] }
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		b.numbers(res, name, signalsv1.Metric_GAUGE_METRIC, m.Gauge().DataPoints(), skip)
	case pmetric.MetricTypeSum:
		b.numbers(res, name, signalsv1.Metric_COUNTER_METRIC, m.Sum().DataPoints(), skip)
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			b.res.addDevice(res, dp.Attributes())
			mm := b.get(name, signalsv1.Metric_HISTOGRAM_METRIC, b.startTags(dp.Attributes(), skip))
			mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
				Value:         &signalsv1.DataPoint_Histogram_{Histogram: histogram(dp)},
				MeasurementTs: b.ts(dp.Timestamp()),
			})
		}
	default:
		if isTwin(m) {
			return // read by the local store (Exponential), not uploaded
		}
		b.st.Skipped += countPoints(m)
	}
}

func (b *metricsBuilder) numbers(res pcommon.Map, name string, typ signalsv1.Metric_MetricType, dps pmetric.NumberDataPointSlice, skip func(string) bool) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		b.res.addDevice(res, dp.Attributes())
		b.point(name, typ, b.startTags(dp.Attributes(), skip), b.ts(dp.Timestamp()), number(dp))
	}
}

// point adds one gauge or counter value. Counter values that land on the
// same series and time within one upload (codes or kinds the name map
// folds together) are summed, as Graphsignal's own recorders sum them.
func (b *metricsBuilder) point(name string, typ signalsv1.Metric_MetricType, tagKey uint64, ts int64, v float64) {
	mm := b.get(name, typ, tagKey)
	if typ == signalsv1.Metric_COUNTER_METRIC {
		if n := len(mm.Datapoints); n > 0 && mm.Datapoints[n-1].MeasurementTs == ts {
			last := mm.Datapoints[n-1]
			last.Value = &signalsv1.DataPoint_Total{Total: last.GetTotal() + v}
			return
		}
		mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{Value: &signalsv1.DataPoint_Total{Total: v}, MeasurementTs: ts})
		return
	}
	mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{Value: &signalsv1.DataPoint_Gauge{Gauge: v}, MeasurementTs: ts})
}

func countPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	}
	return 0
}

func number(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// histogram maps explicit buckets to non-cumulative bins valued at their
// upper bound. The overflow bucket (+Inf) is folded into the last finite
// bound, as Graphsignal's Prometheus recorder does; empty buckets are left
// out.
func histogram(dp pmetric.HistogramDataPoint) *signalsv1.DataPoint_Histogram {
	h := &signalsv1.DataPoint_Histogram{}
	bounds := dp.ExplicitBounds()
	counts := dp.BucketCounts()
	for i := 0; i < counts.Len(); i++ {
		c := counts.At(i)
		if c == 0 || bounds.Len() == 0 {
			continue
		}
		bin := bounds.At(min(i, bounds.Len()-1))
		if n := len(h.Bins); n > 0 && h.Bins[n-1] == bin {
			h.Counts[n-1] += int64(c)
			continue
		}
		h.Bins = append(h.Bins, bin)
		h.Counts = append(h.Counts, int64(c))
	}
	count := int64(dp.Count())
	h.Count = &count
	if dp.HasSum() {
		s := dp.Sum()
		h.Sum = &s
	}
	if dp.HasMin() {
		v := dp.Min()
		h.Min = &v
	}
	if dp.HasMax() {
		v := dp.Max()
		h.Max = &v
	}
	return h
}

// unitToNs converts a duration in unit to nanoseconds.
func unitToNs(unit string) float64 {
	switch unit {
	case "s":
		return 1e9
	case "ms":
		return 1e6
	case "us", "µs":
		return 1e3
	}
	return 1
}

func toUint(v float64) uint64 {
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(math.Round(v))
}
