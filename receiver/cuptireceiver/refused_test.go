// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadatatest"
)

// refusing refuses the first n flushes with err, as memory_limiter does
// under pressure, then passes everything to the sink.
type refusing struct {
	*consumertest.MetricsSink
	n   atomic.Int32
	err error
}

func (c *refusing) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if c.n.Add(-1) >= 0 {
		return c.err
	}
	return c.MetricsSink.ConsumeMetrics(ctx, md)
}

// kernelCount sums a kernel's count data points over everything the sink got.
func kernelCount(sink *consumertest.MetricsSink, kernel string) int64 {
	return int64(kernelSum(sink, names.MetricKernelCount, kernel, 0))
}

// startRefusing starts a receiver that flushes only when the test says, into
// a consumer refusing the first `refusals` flushes with err.
func startRefusing(t *testing.T, refusals int32, err error) (*harness, *refusing) {
	t.Helper()
	h := start(t, func(c *Config) { c.CollectionInterval = time.Hour })
	next := &refusing{MetricsSink: h.sink, err: err}
	next.n.Store(refusals)
	h.r.nextMetrics = next
	return h, next
}

func sendKernels(t *testing.T, h *harness, pid uint32, n int, want uint64) {
	t.Helper()
	c := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendString(cuptiwire.AppendHello(nil, pid, 0, ""), 1, "k_kernel")
	_, err := c.Write(cuptiwire.AppendRecords(b, kernels(1, n, 100)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { rec, _ := h.r.agg.Stats(); return rec == want }, 5*time.Second, 5*time.Millisecond)
}

func TestRefusedIntervalIsCarriedIntoTheNextFlush(t *testing.T) {
	t.Parallel()
	h, _ := startRefusing(t, 2, errors.New("data refused due to high memory usage"))
	sendKernels(t, h, 5, 10, 10)
	h.r.flush(t.Context(), false) // refused: kept
	require.Zero(t, h.sink.DataPointCount())
	sendKernels(t, h, 5, 4, 14)
	h.r.flush(t.Context(), false) // refused again: both intervals kept
	sendKernels(t, h, 5, 3, 17)
	h.r.flush(t.Context(), false) // accepted

	require.Len(t, h.sink.AllMetrics(), 1)
	assert.Equal(t, int64(17), kernelCount(h.sink, "k_kernel"), "every refused record arrives once")
	assert.InDelta(t, 17*100e-9, kernelSeconds(h.sink, "k_kernel", 5), 1e-15)
	metadatatest.AssertEqualReceiverCuptiRefusedFlushes(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	assert.Zero(t, h.counter(t, "receiver_cupti_refused_dropped_records"))

	h.r.flush(t.Context(), false)
	assert.Equal(t, int64(17), kernelCount(h.sink, "k_kernel"), "the carried interval is not sent twice")
}

func TestRefusedPermanentlyOrAtShutdownIsCounted(t *testing.T) {
	t.Parallel()
	h, _ := startRefusing(t, 1, consumererror.NewPermanent(errors.New("bad data")))
	sendKernels(t, h, 5, 10, 10)
	h.r.flush(t.Context(), false)
	metadatatest.AssertEqualReceiverCuptiRefusedDroppedRecords(t, h.tel, []metricdata.DataPoint[int64]{{Value: 10}}, metricdatatest.IgnoreTimestamp())
	h.r.flush(t.Context(), false)
	assert.Zero(t, kernelCount(h.sink, "k_kernel"), "a permanent refusal is not retried")

	h2, _ := startRefusing(t, 1, errors.New("data refused due to high memory usage"))
	sendKernels(t, h2, 6, 7, 7)
	require.NoError(t, h2.r.Shutdown(t.Context()))
	metadatatest.AssertEqualReceiverCuptiRefusedFlushes(t, h2.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverCuptiRefusedDroppedRecords(t, h2.tel, []metricdata.DataPoint[int64]{{Value: 7}}, metricdatatest.IgnoreTimestamp()) // nothing after shutdown can carry it
}
