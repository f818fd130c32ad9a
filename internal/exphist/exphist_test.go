// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/exphist/exphisttest"
)

func lognormal(n int, median, sigma float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = median * math.Exp(sigma*r.NormFloat64())
	}
	return vs
}

func bimodal(n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 2))
	vs := make([]float64, n)
	for i := range vs {
		if i%2 == 0 {
			vs[i] = 0.05 + 0.005*r.NormFloat64() // cache hits
		} else {
			vs[i] = 1.2 + 0.1*r.NormFloat64() // long prefills
		}
	}
	return vs
}

func constant(n int, v float64) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = v
	}
	return vs
}

var quantiles = []float64{0.5, 0.9, 0.95, 0.99}

// Every percentile of every data set is within the histogram's stated
// bound of the exact one, and the bound is within 2% for these ranges.
func TestQuantilesWithinBound(t *testing.T) {
	cases := map[string][]float64{
		"lognormal TTFT, 300":  lognormal(300, 0.159, 0.6, 1),
		"lognormal, 100000":    lognormal(100000, 0.02, 1.0, 2),
		"bimodal":              bimodal(1000, 3),
		"constant 0.25":        constant(200, 0.25),
		"all-ones batch sizes": constant(500, 1),
		"batch sizes 1 to 256": func() []float64 {
			v := make([]float64, 256)
			for i := range v {
				v[i] = float64(i + 1)
			}
			return v
		}(),
		"zeros and values":          append(constant(30, 0), lognormal(70, 3, 0.3, 4)...),
		"1 ms to 60 s (16 octaves)": append(constant(1, 0.001), append(lognormal(500, 0.5, 1, 5), 60)...),
	}
	for name, vs := range cases {
		t.Run(name, func(t *testing.T) {
			h := New()
			for _, v := range vs {
				h.Observe(v)
			}
			bound := RelativeError(h.Scale())
			assert.LessOrEqual(t, bound, 0.02, "scale %d", h.Scale())
			for _, q := range quantiles {
				got, ok := h.Quantile(q)
				require.True(t, ok)
				want := exphisttest.NearestRank(vs, q)
				if want == 0 {
					assert.Zero(t, got, "p%v", q*100)
					continue
				}
				rel := math.Abs(got-want) / want
				assert.LessOrEqual(t, rel, bound*(1+1e-9), "p%v: got %v, exact %v", q*100, got, want)
			}
		})
	}
}

// Constant data reads back exactly: the estimate is clamped to [min, max].
func TestConstantIsExact(t *testing.T) {
	h := New()
	for range 10 {
		h.Observe(1)
	}
	for _, q := range quantiles {
		v, ok := h.Quantile(q)
		require.True(t, ok)
		assert.Equal(t, 1.0, v)
	}
}

// Past 16 octaves the histogram coarsens, and says so through its bound.
func TestWideRangeCoarsens(t *testing.T) {
	h := New()
	vs := []float64{1e-6, 1e-3, 1, 1e3, 1e6}
	for _, v := range vs {
		h.Observe(v)
	}
	assert.Less(t, h.Scale(), int32(5))
	assert.Greater(t, RelativeError(h.Scale()), 0.02)
	for _, q := range []float64{0.2, 0.4, 0.6, 0.8, 1} {
		got, _ := h.Quantile(q)
		want := exphisttest.NearestRank(vs, q)
		assert.LessOrEqual(t, math.Abs(got-want)/want, RelativeError(h.Scale())*(1+1e-9), "q %v", q)
	}
	assert.LessOrEqual(t, len(h.counts), MaxSize)
}

// MapToIndex puts every value in the bucket whose bounds hold it.
func TestMapToIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, scale := range []int32{-4, -1, 0, 1, 3, 5, 8, 12, 20} {
		for range 2000 {
			v := math.Exp2(r.Float64()*60 - 30)
			i := MapToIndex(v, scale)
			lo, hi := LowerBound(i, scale), LowerBound(i+1, scale)
			// One ulp of slack at a boundary (the logarithm's rounding).
			assert.True(t, lo*(1-1e-12) < v && v <= hi*(1+1e-12), "scale %d v %v idx %d (%v, %v]", scale, v, i, lo, hi)
		}
		for _, e := range []int{-20, -1, 0, 1, 7} {
			if scale < 0 {
				break // below scale 0 only every 2^-scale-th power of two is a bound
			}
			v := math.Ldexp(1, e)
			i := MapToIndex(v, scale)
			assert.Equal(t, v, LowerBound(i+1, scale), "powers of two are upper bounds, scale %d 2^%d", scale, e)
		}
	}
}

// Merging histograms gives the same percentiles as observing everything in
// one, at the coarser scale; a pdata round trip keeps every count.
func TestMergeAndRoundTrip(t *testing.T) {
	a, b, all := New(), New(), New()
	va, vb := lognormal(400, 0.01, 0.3, 8), lognormal(400, 2, 0.3, 9)
	for _, v := range va {
		a.Observe(v)
		all.Observe(v)
	}
	for _, v := range vb {
		b.Observe(v)
		all.Observe(v)
	}
	a.Merge(b)
	assert.Equal(t, all.Scale(), a.Scale())
	assert.Equal(t, all.Count(), a.Count())
	for _, q := range quantiles {
		x, _ := a.Quantile(q)
		y, _ := all.Quantile(q)
		assert.Equal(t, y, x, "q %v", q)
	}
	dp := pmetric.NewExponentialHistogramDataPoint()
	a.AppendTo(dp)
	back, ok := FromPoint(dp)
	require.True(t, ok)
	for _, q := range quantiles {
		x, _ := a.Quantile(q)
		y, _ := back.Quantile(q)
		assert.Equal(t, x, y, "q %v", q)
	}
}

// Sub turns two cumulative points into the interval between them.
func TestSub(t *testing.T) {
	cum := New()
	first := lognormal(100, 0.1, 0.2, 10)
	for _, v := range first {
		cum.Observe(v)
	}
	dp := pmetric.NewExponentialHistogramDataPoint()
	cum.AppendTo(dp)
	prev, _ := FromPoint(dp)
	second := lognormal(300, 0.5, 0.2, 11)
	for _, v := range second {
		cum.Observe(v)
	}
	dp2 := pmetric.NewExponentialHistogramDataPoint()
	cum.AppendTo(dp2)
	cur, _ := FromPoint(dp2)
	require.True(t, cur.Sub(prev))
	assert.Equal(t, uint64(300), cur.Count())
	got, _ := cur.Quantile(0.5)
	want := exphisttest.NearestRank(second, 0.5)
	assert.LessOrEqual(t, math.Abs(got-want)/want, RelativeError(cur.Scale()))
	assert.False(t, prev.Sub(cur), "a later point is not a prefix of an earlier one")
}

// Points from outside (another pipeline) with odd scales or offsets are
// refused or read without panicking.
func FuzzFromPoint(f *testing.F) {
	f.Add(int32(3), int32(-10), uint64(1), uint64(2), uint64(0))
	f.Add(int32(-5), int32(0), uint64(1), uint64(0), uint64(3))
	f.Add(int32(30), int32(math.MaxInt32-1), uint64(5), uint64(5), uint64(0))
	f.Fuzz(func(t *testing.T, scale, offset int32, c0, c1, zero uint64) {
		dp := pmetric.NewExponentialHistogramDataPoint()
		dp.SetScale(scale)
		dp.Positive().SetOffset(offset)
		dp.Positive().BucketCounts().FromRaw([]uint64{c0 % 1000, c1 % 1000})
		dp.SetZeroCount(zero % 1000)
		dp.SetCount(c0%1000 + c1%1000 + zero%1000)
		h, ok := FromPoint(dp)
		if !ok {
			return
		}
		if len(h.counts) > MaxSize {
			t.Fatalf("%d buckets", len(h.counts))
		}
		if v, ok := h.Quantile(0.5); ok && (math.IsNaN(v) || v < 0) {
			t.Fatalf("p50 %v", v)
		}
	})
}

// The per-value path gives the same index as MapToIndex.
func TestTableIndexMatchesMapToIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for scale := int32(1); scale <= maxTableScale; scale++ {
		h := New()
		h.scale = scale
		for range 5000 {
			v := math.Exp2(r.Float64()*80 - 40)
			require.Equal(t, MapToIndex(v, scale), h.tableIndex(v), "scale %d v %v", scale, v)
		}
		for _, e := range []int{-30, -1, 0, 1, 9} {
			v := math.Ldexp(1, e)
			require.Equal(t, MapToIndex(v, scale), h.tableIndex(v), "scale %d 2^%d", scale, e)
		}
	}
}
