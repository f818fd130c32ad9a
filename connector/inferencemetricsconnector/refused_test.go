// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadatatest"
	"github.com/inferprof/inferprof/internal/names"
)

// refusingSink is the next consumer of a pipeline that refuses while told
// to, as memory_limiter or a full sending queue does. during runs inside the
// refused call, standing for spans that arrive while a flush is in flight.
type refusingSink struct {
	consumertest.MetricsSink
	refuse error
	during func()
}

func (r *refusingSink) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if f := r.during; f != nil {
		r.during = nil
		f()
	}
	if r.refuse != nil {
		return r.refuse
	}
	return r.MetricsSink.ConsumeMetrics(ctx, md)
}

func TestDeltaKeepsRefusedInterval(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig().(*Config)
	cfg.AggregationTemporality = TemporalityDelta
	clock := clockwork.NewFakeClockAt(t0)
	next := &refusingSink{}
	c, err := newConnector(metadatatest.NewSettings(tel), cfg, next, clock)
	require.NoError(t, err)
	ids := byte(0)
	send := func(ttft float64) {
		td, spans := batch(vllmResource)
		ids++
		s := spans.AppendEmpty()
		s.SetName("llm_request")
		s.SetTraceID(pcommon.TraceID{1, ids})
		s.SetSpanID(pcommon.SpanID{2, ids})
		require.NoError(t, s.Attributes().FromRaw(canonical("llama", ttft, 1, 0, ttft, 0.5, 10, 10)))
		require.NoError(t, c.ConsumeTraces(t.Context(), td))
	}
	flush := func() {
		clock.Advance(15 * time.Second)
		c.flush(t.Context(), false)
	}

	// Interval 1 is refused; a request arrives while that flush is in flight.
	send(0.1)
	next.refuse = errors.New("data refused due to high memory usage")
	next.during = func() { send(0.2) }
	flush()
	assert.Empty(t, next.AllMetrics())

	// Interval 2 is accepted and carries both requests, from the first start.
	next.refuse = nil
	send(0.4)
	flush()
	require.Len(t, next.AllMetrics(), 1)
	md := next.AllMetrics()[0]
	ttft := histPoints(t, md, names.MetricTimeToFirstToken)[llama]
	assert.Equal(t, uint64(3), ttft.Count())
	assert.InDelta(t, 0.7, ttft.Sum(), 1e-9)
	assert.InDelta(t, 0.1, ttft.Min(), 1e-12)
	assert.InDelta(t, 0.4, ttft.Max(), 1e-12)
	assert.Equal(t, 3, ttft.Exemplars().Len(), "exemplars of the refused interval are kept")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), ttft.StartTimestamp(), "the refused interval's start")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(30*time.Second)), ttft.Timestamp())
	assert.Equal(t, map[string]int64{llama: 3}, sumPoints(t, md, names.MetricRequests))

	// The next interval starts where the accepted one ended.
	send(0.3)
	flush()
	require.Len(t, next.AllMetrics(), 2)
	third := histPoints(t, next.AllMetrics()[1], names.MetricTimeToFirstToken)[llama]
	assert.Equal(t, uint64(1), third.Count())
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(30*time.Second)), third.StartTimestamp())

	// A permanent refusal cannot be retried: the interval is dropped, counted.
	send(0.5)
	next.refuse = consumererror.NewPermanent(errors.New("bad metrics"))
	flush()
	next.refuse = nil
	flush()
	assert.Len(t, next.AllMetrics(), 2, "nothing left of the dropped interval")

	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualConnectorInferenceMetricsRefusedFlushes(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, opts...)
	got, err := tel.GetMetric("otelcol_connector_inference_metrics_dropped_points")
	require.NoError(t, err)
	dropped := got.Data.(metricdata.Sum[int64]).DataPoints[0].Value
	assert.Equal(t, int64(md.DataPointCount()), dropped, "the dropped interval had as many points as the accepted one: the same one series")
	require.NoError(t, c.Shutdown(t.Context()))
}
