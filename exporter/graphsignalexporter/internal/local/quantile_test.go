// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// The inference_metrics connector's bucket bounds
// (connector/inferencemetricsconnector/internal/aggregate/metrics.go).
var (
	boundsTTFT   = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	boundsTokens = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// upload buckets values the way the exporter encodes an OTLP explicit
// histogram: non-cumulative bins at the upper bound, overflow folded into
// the last bound, lifetime min and max.
func upload(values, bounds []float64) *signalsv1.UploadRequest {
	counts := make([]int64, len(bounds))
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, v := range values {
		i := sort.SearchFloat64s(bounds, v) // first bound >= v: (b[i-1], b[i]]
		counts[min(i, len(bounds)-1)]++
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	h := &signalsv1.DataPoint_Histogram{Min: &lo, Max: &hi, Sum: &sum}
	n := int64(len(values))
	h.Count = &n
	for i, c := range counts {
		if c > 0 {
			h.Bins = append(h.Bins, bounds[i])
			h.Counts = append(h.Counts, c)
		}
	}
	return &signalsv1.UploadRequest{Metrics: []*signalsv1.Metric{{
		Name: "h", Type: signalsv1.Metric_HISTOGRAM_METRIC,
		Datapoints: []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Histogram_{Histogram: h}}},
	}}}
}

// exact is the nearest-rank percentile of the values.
func exact(sorted []float64, q float64) float64 {
	return sorted[int(math.Ceil(q*float64(len(sorted))))-1]
}

// TestQuantilesHoldTheirBound compares /signals' p50 and p95 with the exact
// percentiles of the values sent: the exact value is inside the stated
// bucket, so the estimate is off by at most the bucket's width.
func TestQuantilesHoldTheirBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := map[string]struct {
		bounds []float64
		draw   func() float64
	}{
		// Time to first token: log-normal around 0.4 s.
		"ttft": {boundsTTFT, func() float64 { return math.Exp(math.Log(0.4) + 0.6*rng.NormFloat64()) }},
		// A long tail past the last bound, into the folded overflow.
		"ttft_tail": {boundsTTFT, func() float64 { return math.Exp(math.Log(3) + 1.2*rng.NormFloat64()) }},
		// Input tokens, uniform 50..4100: the example, where the old
		// nearest-rank bin said p50 = 4096.
		"input_tokens": {boundsTokens, func() float64 { return float64(50 + rng.IntN(4050)) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{1, 7, 100, 5000} {
				values := make([]float64, n)
				for i := range values {
					values[i] = tc.draw()
				}
				now := time.Unix(1_700_000_000, 0)
				s := New("v", nil, func() time.Time { return now })
				s.Apply(upload(values, tc.bounds))
				st := s.Snapshot().Metrics[0].Stats.(HistogramStats)
				require.Equal(t, QuantileMethod, st.QuantileMethod)
				sorted := slices.Sorted(slices.Values(values))
				for _, q := range []struct {
					q      float64
					est    *float64
					bucket [2]*float64
				}{{0.5, st.P50, st.P50Bucket}, {0.95, st.P95, st.P95Bucket}} {
					want := exact(sorted, q.q)
					require.NotNil(t, q.est)
					// min and max are known here, so both bounds are.
					require.NotNil(t, q.bucket[0])
					require.NotNil(t, q.bucket[1])
					lo, hi := *q.bucket[0], *q.bucket[1]
					assert.LessOrEqual(t, lo, want, "n=%d q=%v: exact %v below the stated bucket", n, q.q, want)
					assert.GreaterOrEqual(t, hi, want, "n=%d q=%v: exact %v above the stated bucket", n, q.q, want)
					assert.LessOrEqual(t, math.Abs(*q.est-want), hi-lo+1e-12, "n=%d q=%v", n, q.q)
					if n == 5000 {
						t.Logf("q=%v exact %.4g estimate %.4g bucket [%.4g, %.4g]", q.q, want, *q.est, lo, hi)
					}
				}
			}
		})
	}
}
