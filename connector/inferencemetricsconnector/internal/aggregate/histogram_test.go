// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestBucketMatchesSearchFloat64s(t *testing.T) {
	for _, bounds := range [][]float64{BoundsTTFT, BoundsITL, BoundsTokens, {1}, {}} {
		for _, v := range []float64{-1, 0, 0.001, 0.0010001, 0.05, 1, 2.5, 10, 1e9, math.Inf(1)} {
			assert.Equal(t, sort.SearchFloat64s(bounds, v), bucket(bounds, v), "%v in %v", v, bounds)
		}
	}
	// Every length of search, each bound itself and a value either side.
	for _, all := range [][]float64{BoundsTTFT, BoundsITL, BoundsTokens} {
		for n := 0; n <= len(all); n++ {
			bounds := all[:n]
			for _, b := range all {
				for _, v := range []float64{b, math.Nextafter(b, math.Inf(-1)), math.Nextafter(b, math.Inf(1))} {
					require.Equal(t, sort.SearchFloat64s(bounds, v), bucket(bounds, v), "%v in %v", v, bounds)
				}
			}
		}
	}
}

func TestHistogramObserve(t *testing.T) {
	h := newHistogram([]float64{1, 2}, 0)
	for _, v := range []float64{0.5, 1, 1.5, 2, 3} {
		h.Observe(v)
	}
	// Upper-inclusive buckets: (-inf,1], (1,2], (2,+inf).
	assert.Equal(t, []uint64{2, 2, 1}, h.counts)
	assert.Equal(t, uint64(5), h.Count())
	assert.InDelta(t, 8.0, h.Sum(), 0)
	assert.InDelta(t, 0.5, h.min, 0)
	assert.InDelta(t, 3.0, h.max, 0)
	h.reset()
	assert.Equal(t, []uint64{0, 0, 0}, h.counts)
	assert.Zero(t, h.Count())
}

func TestExemplarsKeepTheLargest(t *testing.T) {
	h := newHistogram(BoundsTTFT, 3)
	for i, v := range []float64{5, 1, 4, 2, 9, 3, 7, 0.5} {
		h.ObserveExemplar(v, pcommon.Timestamp(i), pcommon.TraceID{byte(i)}, pcommon.SpanID{byte(i)})
	}
	require.Len(t, h.exemplars, 3)
	var got []float64
	for _, e := range h.exemplars {
		got = append(got, e.Value)
		// Each exemplar keeps the ids of the span that produced its value.
		assert.Equal(t, e.TraceID[0], e.SpanID[0])
	}
	assert.ElementsMatch(t, []float64{9, 7, 5}, got)
	assert.Equal(t, uint64(8), h.Count())
}
