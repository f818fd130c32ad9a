// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package bucketquantile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f(v float64) *float64 { return &v }

// TestQuantile: the estimate lies in the bucket holding the nearest rank,
// clamped to [min, max]; the last bin holds the overflow, bounded by max
// only. The thorough check against exact percentiles of sampled data is
// graphsignalexporter/internal/local/quantile_test.go, through /signals.
func TestQuantile(t *testing.T) {
	// 10 values: 2 in (0, 0.1], 6 in (0.1, 0.5], 2 in (0.5, +Inf).
	bins := map[float64]int64{0.1: 2, 0.5: 6, 1: 2}
	v, b := Quantile(bins, f(0.05), f(1.5), 0.5)
	require.NotNil(t, v)
	assert.InDelta(t, 0.1+0.4*3.0/6, *v, 1e-12, "rank 5 is the third of six in (0.1, 0.5]")
	assert.Equal(t, [2]*float64{f(0.1), f(0.5)}, b)

	v, b = Quantile(bins, f(0.05), f(1.5), 0.99)
	require.NotNil(t, v)
	assert.Equal(t, f(1.5), b[1], "the overflow bin is bounded by max")
	assert.LessOrEqual(t, *v, 1.5)
	assert.Greater(t, *v, 0.5)

	v, b = Quantile(bins, f(0.05), nil, 0.01)
	require.NotNil(t, v)
	assert.Equal(t, f(0.05), b[0], "the first bucket starts at min")

	v, _ = Quantile(map[float64]int64{1: 0}, nil, nil, 0.5)
	assert.Nil(t, v, "no counts, no quantile")
}
