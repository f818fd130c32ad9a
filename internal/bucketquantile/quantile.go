// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package bucketquantile reads percentiles from explicit-bucket histograms,
// for /signals and the dashboard alike.
package bucketquantile // import "github.com/inferprof/inferprof/internal/bucketquantile"

import (
	"math"
	"slices"
)

// Method labels percentiles estimated by Quantile: interpolated linearly
// inside the histogram bucket that holds the quantile, not exact
// percentiles of the recorded values.
const Method = "bucket_interpolation"

// MethodExponential labels percentiles read from a base-2 exponential
// histogram (internal/exphist) instead: the bucket holding the nearest
// rank, within its relative error of the exact value.
const MethodExponential = "exponential_histogram"

// Quantile estimates the q-quantile of a histogram in Graphsignal's form
// (upper bound -> count, the last bin also holding the overflow): it finds
// the bucket holding rank ceil(q*count), as the exact nearest-rank
// percentile would, and interpolates linearly between that bucket's bounds.
// A bucket's lower bound is the previous bin, or minV (the minimum, when
// known) for the first. The estimate and the bucket are clamped to
// [minV, maxV]. /signals (graphsignal) and the dashboard (inferprof_ui) both use it, so
// both read quantiles alike.
func Quantile(hbins map[float64]int64, minV, maxV *float64, q float64) (*float64, [2]*float64) {
	h := struct {
		bins     map[float64]int64
		min, max *float64
	}{hbins, minV, maxV}
	var total int64
	bins := make([]float64, 0, len(h.bins))
	for b, c := range h.bins {
		if c > 0 {
			bins = append(bins, b)
			total += c
		}
	}
	if total == 0 {
		return nil, [2]*float64{}
	}
	slices.Sort(bins)
	rank := max(int64(math.Ceil(q*float64(total))), 1)
	var before int64
	i := len(bins) - 1
	for j, b := range bins {
		if before+h.bins[b] >= rank {
			i = j
			break
		}
		before += h.bins[b]
	}
	var lo, hi *float64
	if i > 0 {
		lo = ptr(bins[i-1])
	} else if h.min != nil {
		lo = ptr(min(*h.min, bins[0]))
	}
	hi = ptr(bins[i])
	if i == len(bins)-1 {
		// The last bin also holds the overflow bucket: only max bounds it.
		hi = nil
		if h.max != nil {
			hi = ptr(max(*h.max, bins[i]))
		}
	}
	if h.min != nil && lo != nil {
		lo = ptr(max(*lo, *h.min))
	}
	if h.max != nil && hi != nil {
		hi = ptr(min(*hi, *h.max))
	}
	var v float64
	switch {
	case lo != nil && hi != nil:
		frac := (q*float64(total) - float64(before)) / float64(h.bins[bins[i]])
		frac = min(max(frac, 0), 1)
		v = *lo + frac*(*hi-*lo)
	case hi != nil:
		v = *hi
	case lo != nil:
		v = *lo
	default:
		v = bins[i]
	}
	return &v, [2]*float64{lo, hi}
}

func ptr(v float64) *float64 { return &v }
