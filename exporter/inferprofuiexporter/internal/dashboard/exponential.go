// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/bucketquantile"
	"github.com/inferprof/inferprof/internal/exphist"
	"github.com/inferprof/inferprof/internal/names"
)

// addExponential takes an exponential twin of a charted latency metric
// into the same flush's hist, all series merged; it reports whether m was
// one.
func (h *History) addExponential(m pmetric.Metric) bool {
	explicit, ok := names.ExplicitTwin(m.Name())
	if !ok || m.Type() != pmetric.MetricTypeExponentialHistogram {
		return false
	}
	key, ok := latencyMetrics[explicit]
	if !ok || m.ExponentialHistogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
		return true
	}
	for _, dp := range m.ExponentialHistogram().DataPoints().All() {
		if dp.Count() == 0 {
			continue
		}
		if eh, ok := exphist.FromPoint(dp); ok {
			mergeExp(*h.latency[key].at(ms(dp.Timestamp()), newHist), eh)
		}
	}
	return true
}

// expQuantiles reads the point's percentiles from the exponential twin.
func (h *hist) expQuantiles(lp *LatencyPoint) {
	if h.exp == nil || h.exp.Count() == 0 {
		return
	}
	q := func(p float64) *float64 {
		v, _ := h.exp.Quantile(p)
		return fptr(v)
	}
	lp.P50, lp.P90, lp.P99 = q(0.50), q(0.90), q(0.99)
	lp.Method = bucketquantile.MethodExponential
	lp.RelativeError = fptr(exphist.RelativeError(h.exp.Scale()))
}
