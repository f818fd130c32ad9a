// Package encode maps OTLP data, already turned into deltas, to Graphsignal's
// wire messages: metrics and logs to the v1 UploadRequest, spans to the v0
// one.
package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"math"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/names"
)

// ProfileKernels is the PROFILE metric the cupti receiver's kernel time
// table becomes; the name is the one Graphsignal's own profiler uses, so the
// platform's kernel views pick it up.
const ProfileKernels = "cuda_kernels_nanoseconds"

// Stats counts what an encoding changed or left out.
type Stats struct {
	Truncated int // tag keys or values cut to Graphsignal's limits
	Skipped   int // datapoints with no Graphsignal mapping
}

// Encoder maps OTLP to Graphsignal messages. It keeps the first-seen time
// of each resource; everything else is stateless.
type Encoder struct {
	global []kv
	now    func() time.Time

	mu        sync.Mutex
	resources map[string]int64 // first seen, epoch ns
}

// maxResources bounds the first-seen map; past it, first_seen is the
// current upload's time.
const maxResources = 10000

// New returns an encoder adding env tags, config tags (winning over env)
// and instance.id to every signal.
func New(envTags, cfgTags map[string]string, instanceID string, now func() time.Time) *Encoder {
	return &Encoder{
		global:    globalTags(envTags, cfgTags, instanceID),
		now:       now,
		resources: map[string]int64{},
	}
}

// GlobalTags returns the tags every signal carries, sorted by key.
func (e *Encoder) GlobalTags() []*signalsv1.Tag {
	t := tagSet{kvs: e.global}
	return t.v1Tags()
}

type metricKey struct {
	name string
	typ  signalsv1.Metric_MetricType
	tags uint64
}

type profileFrame struct {
	value, samples float64
}

type profileAcc struct {
	tags   []*signalsv1.Tag
	ts     int64
	order  []string
	frames map[string]*profileFrame
}

type metricsBuilder struct {
	e        *Encoder
	req      *signalsv1.UploadRequest
	metrics  map[metricKey]*signalsv1.Metric
	profiles map[uint64]*profileAcc
	profOrd  []uint64
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
		profiles: map[uint64]*profileAcc{},
		res:      e.newResourceBuilder(now),
	}
	b.tags.cache = map[kv]*signalsv1.Tag{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := rm.Resource().Attributes()
		b.res.add(res)
		b.setResource(res)
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				b.metric(res, ms.At(k))
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
func (b *metricsBuilder) startTags(_ pcommon.Map, attrs pcommon.Map, skip func(string) bool) uint64 {
	b.tags.kvs = append(b.tags.kvs[:0], b.base...)
	b.tags.putMap(attrs, skip)
	return b.tags.finish()
}

// setResource computes the tags every datapoint of a resource shares.
func (b *metricsBuilder) setResource(res pcommon.Map) {
	b.tags.reset(b.e.global)
	b.tags.putMap(res, func(k string) bool { return resourceDeny[k] })
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

func (b *metricsBuilder) metric(res pcommon.Map, m pmetric.Metric) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			b.res.addDevice(res, dp.Attributes())
			mm := b.get(m.Name(), signalsv1.Metric_GAUGE_METRIC, b.startTags(res, dp.Attributes(), nil))
			mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
				Value:         &signalsv1.DataPoint_Gauge{Gauge: number(dp)},
				MeasurementTs: b.ts(dp.Timestamp()),
			})
		}
	case pmetric.MetricTypeSum:
		if (m.Name() == names.MetricKernelDuration || m.Name() == names.MetricKernelCount) && m.Sum().IsMonotonic() {
			b.kernels(res, m)
			return
		}
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			b.res.addDevice(res, dp.Attributes())
			mm := b.get(m.Name(), signalsv1.Metric_COUNTER_METRIC, b.startTags(res, dp.Attributes(), nil))
			mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
				Value:         &signalsv1.DataPoint_Total{Total: number(dp)},
				MeasurementTs: b.ts(dp.Timestamp()),
			})
		}
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			b.res.addDevice(res, dp.Attributes())
			mm := b.get(m.Name(), signalsv1.Metric_HISTOGRAM_METRIC, b.startTags(res, dp.Attributes(), nil))
			mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
				Value:         &signalsv1.DataPoint_Histogram_{Histogram: histogram(dp)},
				MeasurementTs: b.ts(dp.Timestamp()),
			})
		}
	default:
		b.st.Skipped += countPoints(m)
	}
}

func countPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
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

// unitToNs converts a kernel duration in unit to nanoseconds.
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

// kernels folds the cupti receiver's kernel time table into PROFILE
// metrics: one per tag set without the kernel name, one frame per kernel.
func (b *metricsBuilder) kernels(res pcommon.Map, m pmetric.Metric) {
	isDuration := m.Name() == names.MetricKernelDuration
	scale := unitToNs(m.Unit())
	dps := m.Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		nameV, ok := dp.Attributes().Get(names.AttrKernelName)
		if !ok || nameV.Str() == "" {
			b.st.Skipped++
			continue
		}
		b.res.addDevice(res, dp.Attributes())
		key := b.startTags(res, dp.Attributes(), func(k string) bool { return k == names.AttrKernelName })
		p, ok := b.profiles[key]
		if !ok {
			p = &profileAcc{tags: b.tags.v1Tags(), frames: map[string]*profileFrame{}}
			b.profiles[key] = p
			b.profOrd = append(b.profOrd, key)
		}
		p.ts = max(p.ts, b.ts(dp.Timestamp()))
		frameName := clean(nameV.Str())
		f, ok := p.frames[frameName]
		if !ok {
			f = &profileFrame{}
			p.frames[frameName] = f
			p.order = append(p.order, frameName)
		}
		if isDuration {
			f.value += number(dp) * scale
		} else {
			f.samples += number(dp)
		}
	}
}

func toUint(v float64) uint64 {
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(math.Round(v))
}

func (b *metricsBuilder) flushProfiles() {
	for _, key := range b.profOrd {
		p := b.profiles[key]
		prof := &signalsv1.DataPoint_Profile{}
		m := &signalsv1.Metric{Name: ProfileKernels, Type: signalsv1.Metric_PROFILE_METRIC, Tags: p.tags}
		for _, name := range p.order {
			f := p.frames[name]
			id := xxhash.Sum64String(name)
			prof.FrameIds = append(prof.FrameIds, id)
			prof.Values = append(prof.Values, toUint(f.value))
			prof.Samples = append(prof.Samples, toUint(f.samples))
			m.Frames = append(m.Frames, &signalsv1.ProfileFrame{FrameId: id, Name: name})
		}
		m.Datapoints = []*signalsv1.DataPoint{{
			Value:         &signalsv1.DataPoint_Profile_{Profile: prof},
			MeasurementTs: p.ts,
		}}
		b.req.Metrics = append(b.req.Metrics, m)
	}
}

// Logs encodes ld into LogBatches, one per distinct tag set.
func (e *Encoder) Logs(ld plog.Logs) (*signalsv1.UploadRequest, Stats) {
	now := e.now().UnixNano()
	req := &signalsv1.UploadRequest{UploadTs: now}
	res := e.newResourceBuilder(now)
	batches := map[uint64]*signalsv1.LogBatch{}
	tags := tagSet{cache: map[kv]*signalsv1.Tag{}}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		rattrs := rl.Resource().Attributes()
		res.add(rattrs)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				tags.reset(e.global)
				tags.putMap(rattrs, func(k string) bool { return resourceDeny[k] })
				tags.putMap(lr.Attributes(), func(k string) bool { return strings.HasPrefix(k, "exception.") })
				key := tags.finish()
				lb, ok := batches[key]
				if !ok {
					lb = &signalsv1.LogBatch{Tags: tags.v1Tags()}
					batches[key] = lb
					req.LogBatches = append(req.LogBatches, lb)
				}
				lb.LogEntries = append(lb.LogEntries, logEntry(lr))
			}
		}
	}
	req.Resources = res.finish()
	return req, Stats{Truncated: tags.truncated}
}

func logEntry(lr plog.LogRecord) *signalsv1.LogEntry {
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	msg, _ := cut(clean(lr.Body().AsString()), MaxAttr)
	return &signalsv1.LogEntry{
		Level:     Level(lr.SeverityNumber(), lr.SeverityText()),
		Message:   msg,
		Exception: exception(lr.Attributes()),
		LogTs:     int64(ts),
	}
}

func exception(attrs pcommon.Map) string {
	if st, ok := attrs.Get("exception.stacktrace"); ok && st.Str() != "" {
		s, _ := cut(clean(st.Str()), maxExcept)
		return s
	}
	var parts []string
	for _, k := range []string{"exception.type", "exception.message"} {
		if v, ok := attrs.Get(k); ok && v.AsString() != "" {
			parts = append(parts, v.AsString())
		}
	}
	s, _ := cut(clean(strings.Join(parts, ": ")), maxExcept)
	return s
}

// Level maps an OTLP severity to Graphsignal's log level: severity numbers
// 1-4 TRACE, 5-8 DEBUG, 9-12 INFO, 13-16 WARNING, 17-20 ERROR, 21-24
// CRITICAL; with no number, the severity text decides.
func Level(n plog.SeverityNumber, text string) signalsv1.LogEntry_LogLevel {
	switch {
	case n >= 21:
		return signalsv1.LogEntry_CRITICAL_LEVEL
	case n >= 17:
		return signalsv1.LogEntry_ERROR_LEVEL
	case n >= 13:
		return signalsv1.LogEntry_WARNING_LEVEL
	case n >= 9:
		return signalsv1.LogEntry_INFO_LEVEL
	case n >= 5:
		return signalsv1.LogEntry_DEBUG_LEVEL
	case n >= 1:
		return signalsv1.LogEntry_TRACE_LEVEL
	}
	t := strings.ToLower(text)
	switch {
	case strings.HasPrefix(t, "fatal"), strings.HasPrefix(t, "crit"), strings.HasPrefix(t, "panic"):
		return signalsv1.LogEntry_CRITICAL_LEVEL
	case strings.HasPrefix(t, "err"):
		return signalsv1.LogEntry_ERROR_LEVEL
	case strings.HasPrefix(t, "warn"):
		return signalsv1.LogEntry_WARNING_LEVEL
	case strings.HasPrefix(t, "info"):
		return signalsv1.LogEntry_INFO_LEVEL
	case strings.HasPrefix(t, "debug"):
		return signalsv1.LogEntry_DEBUG_LEVEL
	case strings.HasPrefix(t, "trace"):
		return signalsv1.LogEntry_TRACE_LEVEL
	}
	return signalsv1.LogEntry_UNSPECIFIED_LEVEL
}
