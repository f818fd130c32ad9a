// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package delta turns OTLP metrics into the per-upload deltas Graphsignal
// expects: counters and histograms as increments since the last upload,
// gauges only when their timestamp advanced, histogram min/max as lifetime
// extremes. It runs before the sending queue, so a queued or retried upload
// carries deltas that never need recomputing.
package delta // import "github.com/inferprof/inferprof/internal/delta"

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/exphist"
)

const (
	// DefaultMaxSeries bounds the state kept per series.
	DefaultMaxSeries = 100_000
	// DefaultExpiry forgets a series not seen for this long.
	DefaultExpiry = 10 * time.Minute
	sweepEvery    = time.Minute
)

// Stats counts what a conversion could not carry over.
type Stats struct {
	Unsupported int // unreadable exponential histograms, non-finite values
	Overflow    int // new series refused because MaxSeries were tracked
}

type series struct {
	seen    int64  // wall clock ns, for expiry
	ts      uint64 // last point timestamp
	value   float64
	count   uint64
	sum     float64
	buckets []uint64
	bounds  []float64
	min     float64
	max     float64
	hasMin  bool
	hasMax  bool
	exp     *exphist.Histogram // an exponential histogram's last cumulative point; never changed once set
}

// Converter holds the last cumulative state of every series. Convert, then
// Commit once the result is safely queued, so that a refused batch can be
// offered again without losing its increments.
type Converter struct {
	mu        sync.Mutex
	series    map[uint64]*series
	startNs   uint64
	maxSeries int
	expiry    time.Duration
	now       func() time.Time
	lastSweep time.Time
	// key's scratch, used under mu
	digest *xxhash.Digest
	keyBuf [33]byte
}

// New returns a converter. Cumulative series that began before start are
// first used as a baseline only: their earlier increments were uploaded by a
// previous run or are unknown, and sending the whole total again would count
// it twice.
func New(start time.Time, now func() time.Time) *Converter {
	return &Converter{
		series:    map[uint64]*series{},
		startNs:   uint64(start.UnixNano()),
		maxSeries: DefaultMaxSeries,
		expiry:    DefaultExpiry,
		now:       now,
		lastSweep: now(),
		digest:    xxhash.New(),
	}
}

// Tx holds the state a Convert would leave behind.
type Tx struct {
	pending map[uint64]*series
	now     int64
}

// Convert returns md as deltas, leaving md untouched. The result holds
// gauges (including non-monotonic sums), monotonic sums with delta
// temporality, and histograms with delta temporality (summaries become
// histograms without buckets). Points that carry nothing new are left out.
func (c *Converter) Convert(md pmetric.Metrics) (pmetric.Metrics, *Tx, Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tx := &Tx{pending: map[uint64]*series{}, now: c.now().UnixNano()}
	var st Stats
	out := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := pdatautil.MapHash(rm.Resource().Attributes())
		orm := out.ResourceMetrics().AppendEmpty()
		rm.Resource().CopyTo(orm.Resource())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			osm := orm.ScopeMetrics().AppendEmpty()
			sm.Scope().CopyTo(osm.Scope())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				c.convertMetric(tx, &st, res, ms.At(k), osm.Metrics())
			}
		}
	}
	// Leave out what became empty.
	out.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool { return dataPointCount(m) == 0 })
			return sm.Metrics().Len() == 0
		})
		return rm.ScopeMetrics().Len() == 0
	})
	return out, tx, st
}

// Commit makes tx's state current.
func (c *Converter) Commit(tx *Tx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range tx.pending {
		c.series[k] = s
	}
	now := c.now()
	if now.Sub(c.lastSweep) >= sweepEvery {
		c.lastSweep = now
		cutoff := now.Add(-c.expiry).UnixNano()
		for k, s := range c.series {
			if s.seen < cutoff {
				delete(c.series, k)
			}
		}
	}
}

// Len returns how many series are tracked.
func (c *Converter) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.series)
}

func dataPointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	}
	return 0
}

// lookup returns the series state (a copy held in tx) and whether it existed.
func (c *Converter) lookup(tx *Tx, st *Stats, key uint64) (*series, bool) {
	if s, ok := tx.pending[key]; ok {
		return s, true
	}
	if s, ok := c.series[key]; ok {
		cp := *s
		cp.buckets = slices.Clone(s.buckets)
		tx.pending[key] = &cp
		return &cp, true
	}
	if len(c.series)+len(tx.pending) >= c.maxSeries {
		st.Overflow++
		return nil, false
	}
	s := &series{}
	tx.pending[key] = s
	return s, false
}

// key identifies a series: its resource's and its point's attribute sets
// (pdatautil.MapHash: independent of order, and typed, as contrib keys
// them), the kind of metric and its name, folded into 64 bits so the maps
// keep small keys.
func (c *Converter) key(res [16]byte, kind byte, name string, attrs pcommon.Map) uint64 {
	a := pdatautil.MapHash(attrs)
	copy(c.keyBuf[:16], res[:])
	copy(c.keyBuf[16:32], a[:])
	c.keyBuf[32] = kind
	c.digest.Reset()
	_, _ = c.digest.Write(c.keyBuf[:])
	_, _ = c.digest.WriteString(name)
	return c.digest.Sum64()
}

func newLike(dst pmetric.MetricSlice, m pmetric.Metric) pmetric.Metric {
	om := dst.AppendEmpty()
	om.SetName(m.Name())
	om.SetUnit(m.Unit())
	om.SetDescription(m.Description())
	return om
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func numberValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// firstIsBaseline says whether the first cumulative point of a series only
// sets the baseline (it began before this converter did).
func (c *Converter) firstIsBaseline(start pcommon.Timestamp) bool {
	return start != 0 && uint64(start) < c.startNs
}

func (c *Converter) convertMetric(tx *Tx, st *Stats, res [16]byte, m pmetric.Metric, dst pmetric.MetricSlice) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		om := newLike(dst, m)
		c.gauge(tx, st, res, m.Name(), m.Gauge().DataPoints(), om.SetEmptyGauge().DataPoints())
	case pmetric.MetricTypeSum:
		s := m.Sum()
		om := newLike(dst, m)
		if !s.IsMonotonic() {
			// An up-down counter is a level: Graphsignal shows it as a gauge.
			c.gauge(tx, st, res, m.Name(), s.DataPoints(), om.SetEmptyGauge().DataPoints())
			return
		}
		os := om.SetEmptySum()
		os.SetIsMonotonic(true)
		os.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.sum(tx, st, res, m.Name(), s.AggregationTemporality(), s.DataPoints(), os.DataPoints())
	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		oh := newLike(dst, m).SetEmptyHistogram()
		oh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.histogram(tx, st, res, m.Name(), h.AggregationTemporality(), h.DataPoints(), oh.DataPoints())
	case pmetric.MetricTypeSummary:
		oh := newLike(dst, m).SetEmptyHistogram()
		oh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.summary(tx, st, res, m.Name(), m.Summary().DataPoints(), oh.DataPoints())
	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		oh := newLike(dst, m).SetEmptyExponentialHistogram()
		oh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		c.exponential(tx, st, res, m.Name(), h.AggregationTemporality(), h.DataPoints(), oh.DataPoints())
	}
}

func (c *Converter) gauge(tx *Tx, st *Stats, res [16]byte, name string, in, out pmetric.NumberDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		v := numberValue(dp)
		if dp.ValueType() == pmetric.NumberDataPointValueTypeEmpty || !finite(v) {
			st.Unsupported++
			continue
		}
		s, existed := c.lookup(tx, st, c.key(res, 'g', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		// Graphsignal uploads a gauge only when its timestamp advanced.
		if existed && dp.Timestamp() != 0 && uint64(dp.Timestamp()) <= s.ts {
			continue
		}
		s.ts = uint64(dp.Timestamp())
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetTimestamp(dp.Timestamp())
		o.SetDoubleValue(v)
	}
}

func (c *Converter) sum(tx *Tx, st *Stats, res [16]byte, name string, temp pmetric.AggregationTemporality, in, out pmetric.NumberDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		v := numberValue(dp)
		if dp.ValueType() == pmetric.NumberDataPointValueTypeEmpty || !finite(v) {
			st.Unsupported++
			continue
		}
		d, start := v, dp.StartTimestamp()
		if temp == pmetric.AggregationTemporalityCumulative {
			s, existed := c.lookup(tx, st, c.key(res, 'c', name, dp.Attributes()))
			if s == nil {
				continue
			}
			s.seen = tx.now
			switch {
			case !existed && c.firstIsBaseline(dp.StartTimestamp()):
				d = 0
			case existed && v >= s.value:
				d = v - s.value
				// A delta covers the time since the previous point.
				if s.ts != 0 && s.ts < uint64(dp.Timestamp()) {
					start = pcommon.Timestamp(s.ts)
				}
			}
			// v < s.value is a reset: the full total is the increment.
			s.value = v
			s.ts = uint64(dp.Timestamp())
		}
		if d == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(start)
		o.SetTimestamp(dp.Timestamp())
		o.SetDoubleValue(d)
	}
}

func (c *Converter) histogram(tx *Tx, st *Stats, res [16]byte, name string, temp pmetric.AggregationTemporality, in, out pmetric.HistogramDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		bounds := dp.ExplicitBounds().AsRaw()
		counts := dp.BucketCounts().AsRaw()
		if len(counts) != 0 && len(counts) != len(bounds)+1 {
			st.Unsupported++
			continue
		}
		s, existed := c.lookup(tx, st, c.key(res, 'h', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		count, sum := dp.Count(), dp.Sum()
		dcounts := counts
		if temp == pmetric.AggregationTemporalityCumulative {
			reset := !existed || count < s.count || !slices.Equal(bounds, s.bounds) || len(counts) != len(s.buckets)
			if !reset {
				for b := range counts {
					if counts[b] < s.buckets[b] {
						reset = true
						break
					}
				}
			}
			switch {
			case !existed && c.firstIsBaseline(dp.StartTimestamp()):
				dcounts = make([]uint64, len(counts))
				count, sum = 0, 0
			case !reset:
				dcounts = make([]uint64, len(counts))
				for b := range counts {
					dcounts[b] = counts[b] - s.buckets[b]
				}
				count -= s.count
				sum -= s.sum
			}
			s.count, s.sum, s.buckets, s.bounds = dp.Count(), dp.Sum(), slices.Clone(counts), slices.Clone(bounds)
		}
		// Lifetime extremes: Graphsignal folds them with min/max.
		if dp.HasMin() && finite(dp.Min()) && (!s.hasMin || dp.Min() < s.min) {
			s.min, s.hasMin = dp.Min(), true
		}
		if dp.HasMax() && finite(dp.Max()) && (!s.hasMax || dp.Max() > s.max) {
			s.max, s.hasMax = dp.Max(), true
		}
		if count == 0 && sum == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(dp.StartTimestamp())
		o.SetTimestamp(dp.Timestamp())
		o.SetCount(count)
		if dp.HasSum() {
			o.SetSum(sum)
		}
		o.ExplicitBounds().FromRaw(bounds)
		o.BucketCounts().FromRaw(dcounts)
		if s.hasMin {
			o.SetMin(s.min)
		}
		if s.hasMax {
			o.SetMax(s.max)
		}
	}
}

// summary keeps a summary's count and sum as a histogram without buckets,
// as Graphsignal's client does; quantiles have no Graphsignal field.
func (c *Converter) summary(tx *Tx, st *Stats, res [16]byte, name string, in pmetric.SummaryDataPointSlice, out pmetric.HistogramDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		s, existed := c.lookup(tx, st, c.key(res, 's', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		count, sum := dp.Count(), dp.Sum()
		switch {
		case !existed && c.firstIsBaseline(dp.StartTimestamp()):
			count, sum = 0, 0
		case existed && count >= s.count:
			count -= s.count
			sum -= s.sum
		}
		s.count, s.sum = dp.Count(), dp.Sum()
		if count == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(dp.StartTimestamp())
		o.SetTimestamp(dp.Timestamp())
		o.SetCount(count)
		o.SetSum(sum)
	}
}
