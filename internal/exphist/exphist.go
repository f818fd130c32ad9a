// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package exphist is a base-2 exponential histogram (OpenTelemetry's
// ExponentialHistogram data model) of non-negative values, and the
// percentiles read from one, within a relative error its scale bounds.
//
// A bucket of scale s and index i holds (base^i, base^(i+1)], base =
// 2^(2^-s). The histogram starts at MaxScale and halves its resolution
// (scale - 1) whenever a value would need more than MaxSize buckets, as the
// OpenTelemetry SDKs' exponential aggregation does.
package exphist // import "github.com/inferprof/inferprof/internal/exphist"

import (
	"math"
	"sync"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

const (
	// MaxScale is the finest scale, the SDKs' default.
	MaxScale int32 = 20
	// MinScale is the coarsest scale the Prometheus native-histogram
	// schema accepts.
	MinScale int32 = -4
	// MaxSize is the most buckets a histogram keeps. The SDKs default to
	// 160, which holds the 2% percentile bound (scale 5 or finer) over 5
	// octaves only (a 32× range); 512 holds it over 16 (1 ms to 65 s), and
	// a histogram allocates only the buckets its range needs.
	MaxSize = 512
)

// Histogram is an exponential histogram of non-negative values. The zero
// value is not ready: use New.
type Histogram struct {
	lut      *lut // the boundary table of lutScale, for tableIndex
	lutScale int32
	scale    int32
	offset   int32    // bucket index of counts[0]
	counts   []uint64 // positive buckets from offset; len 0 when none
	zero     uint64   // values equal to 0 (or below: they are clamped)
	count    uint64
	sum      float64
	min, max float64
}

// New returns an empty histogram at MaxScale.
func New() *Histogram { return &Histogram{scale: MaxScale} }

// Scale is the histogram's current scale.
func (h *Histogram) Scale() int32 { return h.scale }

// Count is the number of values observed.
func (h *Histogram) Count() uint64 { return h.count }

// Observe adds v. NaN and infinities are ignored; a negative value counts
// as zero (the values here, durations and sizes, are never negative).
func (h *Histogram) Observe(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	v = max(v, 0)
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if h.count == 0 || v > h.max {
		h.max = v
	}
	h.count++
	h.sum += v
	if v == 0 || v < math.SmallestNonzeroFloat64*(1<<52) {
		// Zero, or subnormal: the zero bucket (threshold 0 in the data
		// point; the mapping below needs normal floats).
		h.zero++
		return
	}
	if h.scale > 0 && h.scale <= maxTableScale {
		h.add(h.tableIndex(v), 1)
		return
	}
	h.add(MapToIndex(v, h.scale), 1)
}

// tableIndex is MapToIndex for a normal v at a table scale, with the
// table kept on the histogram and the exponent read from the bits: the
// per-value path.
func (h *Histogram) tableIndex(v float64) int32 {
	if h.lut == nil || h.lutScale != h.scale {
		h.lut, h.lutScale = table(h.scale), h.scale
	}
	bits := math.Float64bits(v)
	e := int32(bits>>52&0x7ff) - 1023 // v = 1.m × 2^e
	mant := bits & (1<<52 - 1)
	if mant == 0 {
		return e<<h.scale - 1 // a power of two: its bucket's upper bound
	}
	k := h.lut.first[mant>>(52-1-h.scale)]
	if h.lut.b[k] < math.Float64frombits(mant|1023<<52) {
		k++
	}
	return e<<h.scale + k - 1
}

// add counts n values in bucket idx of the current scale, downscaling first
// if the range would need more than MaxSize buckets.
func (h *Histogram) add(idx int32, n uint64) {
	if j := idx - h.offset; j >= 0 && int(j) < len(h.counts) {
		h.counts[j] += n // the common case once the range is known
		return
	}
	if len(h.counts) == 0 {
		h.offset = idx
		h.counts = append(h.counts[:0], n)
		return
	}
	lo, hi := min(h.offset, idx), max(h.offset+int32(len(h.counts))-1, idx)
	if change := downscaleFor(lo, hi); change > 0 {
		h.downscale(change)
		idx >>= change
		lo, hi = min(h.offset, idx), max(h.offset+int32(len(h.counts))-1, idx)
	}
	h.grow(lo, hi)
	h.counts[idx-h.offset] += n
}

// downscaleFor is how many halvings make [lo, hi] fit MaxSize buckets.
func downscaleFor(lo, hi int32) int32 {
	var c int32
	for int64(hi>>c)-int64(lo>>c)+1 > MaxSize {
		c++
	}
	return c
}

// grow makes counts cover [lo, hi], keeping what it holds.
func (h *Histogram) grow(lo, hi int32) {
	n := int(hi - lo + 1)
	if lo == h.offset && n <= len(h.counts) {
		return
	}
	if lo == h.offset && n <= cap(h.counts) {
		h.counts = h.counts[:n]
		return
	}
	nc := make([]uint64, n, max(n, 2*len(h.counts)))
	copy(nc[h.offset-lo:], h.counts)
	h.counts, h.offset = nc, lo
}

// downscale lowers the scale by change, merging buckets.
func (h *Histogram) downscale(change int32) {
	if change <= 0 {
		return
	}
	h.scale -= change
	if len(h.counts) == 0 {
		return
	}
	lo := h.offset >> change
	hi := (h.offset + int32(len(h.counts)) - 1) >> change
	nc := make([]uint64, hi-lo+1)
	for i, c := range h.counts {
		nc[((h.offset+int32(i))>>change)-lo] += c
	}
	h.counts, h.offset = nc, lo
}

// Reset empties the histogram and keeps its scale and buckets' memory, so
// the next interval's values at the same range allocate nothing.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.counts = h.counts[:0]
	h.zero, h.count, h.sum, h.min, h.max = 0, 0, 0, 0, 0
}

// Merge adds o's values, at the coarser of the two scales.
func (h *Histogram) Merge(o *Histogram) {
	if o.count == 0 {
		return
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.count == 0 || o.max > h.max {
		h.max = o.max
	}
	h.count += o.count
	h.sum += o.sum
	h.zero += o.zero
	if len(o.counts) == 0 {
		return
	}
	if o.scale < h.scale {
		h.downscale(h.scale - o.scale)
	}
	shift := o.scale - h.scale
	lo, hi := o.offset>>shift, (o.offset+int32(len(o.counts))-1)>>shift
	if len(h.counts) > 0 {
		lo, hi = min(lo, h.offset), max(hi, h.offset+int32(len(h.counts))-1)
	}
	if change := downscaleFor(lo, hi); change > 0 {
		h.downscale(change)
		shift += change
	}
	for i, c := range o.counts {
		if c > 0 {
			h.add((o.offset+int32(i))>>shift, c)
		}
	}
}

// MapToIndex is the index of the bucket of scale that holds v > 0 (a
// normal float): the i with base^i < v <= base^(i+1). Exact powers of two
// are mapped exactly; elsewhere the logarithm may put a value within one
// ulp of a boundary into the neighbouring bucket, which the error bound
// below absorbs.
func MapToIndex(v float64, scale int32) int32 {
	frac, exp := math.Frexp(v) // v = frac × 2^exp, frac in [0.5, 1)
	if frac == 0.5 {
		// v = 2^(exp-1), the upper bound of its bucket.
		if scale <= 0 {
			return int32((exp - 2) >> -scale)
		}
		return int32((exp-1)<<scale) - 1
	}
	if scale <= 0 {
		return int32((exp - 1) >> -scale)
	}
	if scale <= maxTableScale {
		// v = m × 2^e, m in (1, 2): the index is e×2^s plus the first k
		// with 2^(k/2^s) >= m, minus one. The top s+1 bits of m pick one of
		// 2^(s+1) equal slices of [1, 2), each holding at most one
		// boundary (the closest two, at 1, are ln 2/2^s > 1/2^(s+1) apart):
		// the slice's first candidate and one comparison give k.
		t := table(scale)
		j := math.Float64bits(v) << 12 >> (64 - 1 - scale) // top s+1 mantissa bits
		k := t.first[j]
		if t.b[k] < frac*2 {
			k++
		}
		return int32((exp-1)<<scale) + k - 1
	}
	return int32(math.Ceil(math.Log2(v)*math.Ldexp(1, int(scale)))) - 1
}

// maxTableScale is the finest scale with a boundary table (4096 entries,
// 32 KiB); finer scales, where a histogram holds one value or a range under
// 2^(512/2^12) = 1.09×, use the logarithm.
const maxTableScale = 12

type lut struct {
	once  sync.Once
	b     []float64 // 2^(k/2^s) for k in [0, 2^s]
	first []int32   // per slice j of [1, 2): the first k with b[k] >= 1 + j/2^(s+1)
}

var tables [maxTableScale + 1]lut

func table(scale int32) *lut {
	t := &tables[scale]
	t.once.Do(func() {
		n := 1 << scale
		t.b = make([]float64, n+1)
		for k := range t.b {
			t.b[k] = math.Exp2(float64(k) / float64(n))
		}
		t.b[0], t.b[n] = 1, 2 // exactly, whatever Exp2 rounds to
		slices := 2 * n
		t.first = make([]int32, slices)
		k := int32(0)
		for j := range slices {
			start := 1 + float64(j)/float64(slices)
			for t.b[k] < start {
				k++
			}
			t.first[j] = k
		}
	})
	return t
}

// LowerBound is the lower bound of bucket idx at scale.
func LowerBound(idx, scale int32) float64 {
	return math.Exp2(float64(idx) / math.Ldexp(1, int(scale)))
}

// RelativeError bounds |estimate - exact| / exact for a percentile read at
// scale: the estimate of a bucket (L, U] is 2LU/(L+U), which is within
// (U-L)/(U+L) = (base-1)/(base+1) of every value in it.
func RelativeError(scale int32) float64 {
	b := math.Exp2(math.Ldexp(1, -int(scale)))
	return (b - 1) / (b + 1)
}

// AppendTo writes h into dp: scale, zero count, positive buckets, count,
// sum, min and max (not set when empty).
func (h *Histogram) AppendTo(dp pmetric.ExponentialHistogramDataPoint) {
	dp.SetScale(h.scale)
	dp.SetZeroCount(h.zero)
	dp.SetCount(h.count)
	dp.SetSum(h.sum)
	if h.count > 0 {
		dp.SetMin(h.min)
		dp.SetMax(h.max)
	}
	lo, hi := 0, len(h.counts)
	for lo < hi && h.counts[lo] == 0 {
		lo++
	}
	for hi > lo && h.counts[hi-1] == 0 {
		hi--
	}
	if lo < hi {
		dp.Positive().SetOffset(h.offset + int32(lo))
		dp.Positive().BucketCounts().FromRaw(h.counts[lo:hi])
	}
}

// FromPoint returns the histogram dp holds, or false when it cannot be
// read: a scale outside [MinScale, MaxScale] (the OpenTelemetry SDKs never
// go finer than 20) or buckets no float can fall in. Negative
// buckets, which the values here never have, are counted in the zero
// bucket, as are values under a non-zero zero threshold. Without min or
// max, the percentiles are not clamped.
func FromPoint(dp pmetric.ExponentialHistogramDataPoint) (*Histogram, bool) {
	if dp.Scale() < MinScale || dp.Scale() > MaxScale {
		return nil, false
	}
	h := New()
	h.scale = dp.Scale()
	h.count = dp.Count()
	h.sum = dp.Sum()
	h.min, h.max = 0, math.Inf(1)
	if dp.HasMin() {
		h.min = max(dp.Min(), 0)
	}
	if dp.HasMax() {
		h.max = max(dp.Max(), 0)
	}
	h.zero = dp.ZeroCount()
	for _, c := range dp.Negative().BucketCounts().All() {
		h.zero += c
	}
	pos := dp.Positive()
	n := pos.BucketCounts().Len()
	// Buckets past the largest float or below the smallest normal one hold
	// no value a float can have.
	if first, last := int64(pos.Offset()), int64(pos.Offset())+int64(n)-1; n > 0 &&
		(last >= int64(MapToIndex(math.MaxFloat64, dp.Scale())) || first < int64(MapToIndex(0x1p-1022, dp.Scale()))) {
		return nil, false
	}
	for i, c := range pos.BucketCounts().All() {
		if c > 0 {
			h.add(pos.Offset()+int32(i), c)
		}
	}
	return h, true
}

// Sub removes prev's values from h, both cumulative points of one series
// with prev the earlier: h becomes the interval between them. It reports
// false when prev is not a prefix of h (a reset), leaving h unchanged.
func (h *Histogram) Sub(prev *Histogram) bool {
	if prev.count > h.count || prev.zero > h.zero {
		return false
	}
	if prev.scale < h.scale {
		h.downscale(h.scale - prev.scale)
	}
	shift := prev.scale - h.scale
	sub := make(map[int32]uint64, len(prev.counts))
	for i, c := range prev.counts {
		if c > 0 {
			sub[(prev.offset+int32(i))>>shift] += c
		}
	}
	for idx, c := range sub {
		j := idx - h.offset
		if j < 0 || int(j) >= len(h.counts) || h.counts[j] < c {
			return false
		}
	}
	for idx, c := range sub {
		h.counts[idx-h.offset] -= c
	}
	h.count -= prev.count
	h.zero -= prev.zero
	h.sum -= prev.sum
	// The interval's own min and max are unknown: the cumulative ones still
	// bound it, which is all a percentile needs.
	return true
}

// Quantile is the q-quantile (0 < q <= 1) by nearest rank: the bucket that
// holds the value of rank ceil(q × count), read as 2LU/(L+U), clamped to
// [min, max]; within RelativeError(h.Scale()) of the exact value. It
// reports false when h is empty.
func (h *Histogram) Quantile(q float64) (float64, bool) {
	if h.count == 0 {
		return 0, false
	}
	var total uint64 = h.zero
	for _, c := range h.counts {
		total += c
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	if rank <= h.zero {
		return 0, true
	}
	seen := h.zero
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			idx := h.offset + int32(i)
			lo, hi := LowerBound(idx, h.scale), LowerBound(idx+1, h.scale)
			v := 2 * lo * hi / (lo + hi)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = min(lo, math.MaxFloat64)
			}
			return min(max(v, h.min), h.max), true
		}
	}
	return h.max, true
}
