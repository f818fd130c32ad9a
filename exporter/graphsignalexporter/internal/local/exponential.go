// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package local // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"

import (
	"math"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/bucketquantile"
	"github.com/inferprof/inferprof/internal/exphist"
)

// QuantileMethodExponential labels percentiles read from a base-2
// exponential histogram: the bucket holding the nearest rank, read as
// 2LU/(L+U) and clamped to [min, max], within relative_error of the exact
// value.
const QuantileMethodExponential = bucketquantile.MethodExponential

// ApplyExponential adds one delta of an exponential twin to the histogram
// series named name with tags (the explicit twin's, as encoded). It
// reports false when no such series is held (its explicit twin was not
// applied, or was refused past MaxSeries).
func (s *Store) ApplyExponential(name string, tags []*signalsv1.Tag, h *exphist.Histogram) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.series[tagKey(signalsv1.Metric_HISTOGRAM_METRIC.String()+"\x00"+name, tags)]
	if !ok || se.hist == nil {
		return false
	}
	if se.hist.exp == nil {
		se.hist.exp = exphist.New()
	}
	se.hist.exp.Merge(h)
	return true
}

// expStats replaces the bucket estimates with the exponential twin's.
func (h *histogram) expStats(st *HistogramStats) {
	q := func(p float64) *float64 {
		v, ok := h.exp.Quantile(p)
		if !ok || math.IsNaN(v) {
			return nil
		}
		return &v
	}
	st.P50, st.P90, st.P95, st.P99 = q(0.50), q(0.90), q(0.95), q(0.99)
	st.QuantileMethod = QuantileMethodExponential
	e := exphist.RelativeError(h.exp.Scale())
	st.RelativeError = &e
	// The exact value is within the relative error of the estimate.
	bucket := func(v *float64) [2]*float64 {
		if v == nil {
			return [2]*float64{}
		}
		lo, hi := *v/(1+e), *v/(1-e)
		if st.Min != nil {
			lo = max(lo, *st.Min)
		}
		if st.Max != nil {
			hi = min(hi, *st.Max)
		}
		return [2]*float64{&lo, &hi}
	}
	st.P50Bucket, st.P95Bucket = bucket(st.P50), bucket(st.P95)
}
