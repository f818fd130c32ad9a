// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

func hist(bins []float64, counts []int64, lo, hi float64) *signalsv1.UploadRequest {
	var n int64
	for _, c := range counts {
		n += c
	}
	sum := 1.0
	return &signalsv1.UploadRequest{Metrics: []*signalsv1.Metric{{
		Name: "h", Type: signalsv1.Metric_HISTOGRAM_METRIC,
		Datapoints: []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Histogram_{Histogram: &signalsv1.DataPoint_Histogram{
			Bins: bins, Counts: counts, Count: &n, Sum: &sum, Min: &lo, Max: &hi,
		}}}},
	}}}
}

func TestQuantilesClampedToMinMax(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New("v", nil, func() time.Time { return now })
	s.Apply(hist([]float64{1, 10}, []int64{1, 1}, 0.5, 4))
	st := s.Snapshot().Metrics[0].Stats.(HistogramStats)
	assert.Equal(t, QuantileMethod, st.QuantileMethod)
	// p50 is rank 1 of 2, at the top of the first bucket [min, 1].
	assert.InDelta(t, 1.0, *st.P50, 0)
	assert.Equal(t, [2]float64{0.5, 1}, [2]float64{*st.P50Bucket[0], *st.P50Bucket[1]})
	// p95 is in the last bucket, which max bounds: (1, 10] clamped to 4.
	assert.Equal(t, [2]float64{1, 4}, [2]float64{*st.P95Bucket[0], *st.P95Bucket[1]})
	assert.GreaterOrEqual(t, *st.P95, 1.0)
	assert.LessOrEqual(t, *st.P95, 4.0, "clamped to max 4")
	assert.Equal(t, int64(2), *st.Count)
	assert.InDelta(t, 0.5, *st.Mean, 0)
}

func TestHistogramWithoutBinsHasNullQuantiles(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New("v", nil, func() time.Time { return now })
	s.Apply(hist(nil, nil, 1, 1))
	st := s.Snapshot().Metrics[0].Stats.(HistogramStats)
	assert.Nil(t, st.P50)
	assert.Nil(t, st.P95)
}

func TestQuantileBoundsUnknownWithoutMinMax(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New("v", nil, func() time.Time { return now })
	n := int64(4)
	sum := 10.0
	// A Prometheus histogram: bins but no min or max.
	s.Apply(&signalsv1.UploadRequest{Metrics: []*signalsv1.Metric{{
		Name: "h", Type: signalsv1.Metric_HISTOGRAM_METRIC,
		Datapoints: []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Histogram_{Histogram: &signalsv1.DataPoint_Histogram{
			Bins: []float64{1, 5}, Counts: []int64{2, 2}, Count: &n, Sum: &sum,
		}}}},
	}}})
	st := s.Snapshot().Metrics[0].Stats.(HistogramStats)
	assert.Nil(t, st.P50Bucket[0], "nothing bounds the first bucket from below")
	assert.InDelta(t, 1.0, *st.P50Bucket[1], 0)
	assert.InDelta(t, 1.0, *st.P50, 0)
	assert.Nil(t, st.P95Bucket[1], "the last bin holds the overflow; no max bounds it")
	assert.InDelta(t, 1.0, *st.P95Bucket[0], 0)
}

func TestExpiryAndCap(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New("v", nil, func() time.Time { return now })
	req := &signalsv1.UploadRequest{}
	for i := 0; i < MaxSeries+3; i++ {
		req.Metrics = append(req.Metrics, &signalsv1.Metric{
			Name: "g", Type: signalsv1.Metric_GAUGE_METRIC,
			Tags:       []*signalsv1.Tag{{Key: "i", Value: string(rune('a'+i%26)) + time.Duration(i).String()}},
			Datapoints: []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Gauge{Gauge: 1}}},
		})
	}
	assert.Equal(t, 3, s.Apply(req))
	require.Len(t, s.Snapshot().Metrics, MaxSeries)
	now = now.Add(Expiry + time.Second)
	assert.Empty(t, s.Snapshot().Metrics)
}

func TestErrorsKeepLastTen(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New("v", nil, func() time.Time { return now })
	lb := &signalsv1.LogBatch{}
	for i := 0; i < 15; i++ {
		lb.LogEntries = append(lb.LogEntries, &signalsv1.LogEntry{Level: signalsv1.LogEntry_ERROR_LEVEL, Message: time.Duration(i).String(), LogTs: int64(i)})
	}
	lb.LogEntries = append(lb.LogEntries, &signalsv1.LogEntry{Level: signalsv1.LogEntry_INFO_LEVEL, Message: "info"})
	s.Apply(&signalsv1.UploadRequest{LogBatches: []*signalsv1.LogBatch{lb}})
	errs := s.Snapshot().Errors
	require.Len(t, errs, 10)
	assert.Equal(t, int64(5), errs[0].LogNs)
	assert.Equal(t, int64(14), errs[9].LogNs)
}
