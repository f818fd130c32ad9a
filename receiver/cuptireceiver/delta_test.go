// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/names"
)

// fakeClock is the receiver's clock, moved by the test.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t pcommon.Timestamp) { c.ns.Store(int64(t)) }

// point is one emitted delta point, named by its series.
type point struct {
	series     string
	start, end pcommon.Timestamp
	value      float64
}

// points lists the sink's sum points in the order they were emitted.
func points(sink *consumertest.MetricsSink) []point {
	var out []point
	for _, md := range sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			rm := rms.At(i)
			res := rm.Resource().Attributes().AsRaw()
			sms := rm.ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for m := range ms.Len() {
					metric := ms.At(m)
					if metric.Type() != pmetric.MetricTypeSum {
						continue
					}
					dps := metric.Sum().DataPoints()
					for d := range dps.Len() {
						dp := dps.At(d)
						v := dp.DoubleValue()
						if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
							v = float64(dp.IntValue())
						}
						name := metric.Name() + "|" + rawString(res) + rawString(dp.Attributes().AsRaw())
						out = append(out, point{series: name, start: dp.StartTimestamp(), end: dp.Timestamp(), value: v})
					}
				}
			}
		}
	}
	return out
}

func rawString(m map[string]any) string {
	v := pcommon.NewValueEmpty()
	_ = v.FromRaw(m)
	return v.AsString()
}

// sendNamed sends n kernel records of one kernel name on a new connection of
// pid, and waits until the aggregator counted want records in all.
func sendNamed(t *testing.T, h *harness, pid uint32, kernel string, n int, want uint64) {
	t.Helper()
	c := dial(t, h.cfg.Endpoint)
	b := cuptiwire.AppendString(cuptiwire.AppendHello(nil, pid, 0, ""), 1, kernel)
	_, err := c.Write(cuptiwire.AppendRecords(b, kernels(1, n, 100)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { rec, _ := h.r.agg.Stats(); return rec == want }, 5*time.Second, 5*time.Millisecond)
}

// Prometheus' exporter adds a delta point only when it starts at its
// series' previous point's end; any other start is a reset that replaces
// the total. A series absent from a flush (the whole source idle, or one
// kernel idle while another ran) must start its next point at its own last
// end, not at the previous flush.
func TestDeltaStartsAtTheSeriesLastEndAcrossIdleFlushes(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{}
	base := pcommon.Timestamp(1_800_000_000_000_000_000)
	clock.set(base)
	h := startWithClock(t, func(c *Config) { c.CollectionInterval = time.Hour }, nil, clock.now)
	flushAt := func(ts pcommon.Timestamp) {
		clock.set(ts)
		h.r.flush(t.Context(), false)
	}
	t1, t2, t3, t4 := base+1e9, base+2e9, base+3e9, base+4e9

	sendNamed(t, h, 5, "k_a", 10, 10)
	flushAt(t1) // k_a
	flushAt(t2) // idle: nothing emitted
	require.Len(t, h.sink.AllMetrics(), 1, "an idle flush emits nothing")
	sendNamed(t, h, 5, "k_b", 3, 13)
	flushAt(t3) // k_b only: k_a idle in a busy resource
	sendNamed(t, h, 5, "k_a", 5, 18)
	sendNamed(t, h, 5, "k_b", 2, 20)
	flushAt(t4) // both

	pts := points(h.sink)
	require.NotEmpty(t, pts)
	last := map[string]pcommon.Timestamp{}
	totals := map[string]float64{}
	for _, p := range pts {
		require.Less(t, p.start, p.end, "%s", p.series)
		if prev, ok := last[p.series]; ok {
			require.Equal(t, prev, p.start, "%s starts at its own last end, or Prometheus resets it", p.series)
		}
		last[p.series] = p.end
		totals[p.series] += p.value
	}

	// k_a ran at t1 and t4: its second point covers [t1, t4], over the idle
	// flush and the flush it was absent from.
	var aStarts, bStarts []pcommon.Timestamp
	for _, p := range pts {
		switch {
		case !strings.HasPrefix(p.series, names.MetricKernelCount+"|"):
		case p.end == t4 && strings.Contains(p.series, `"k_a"`):
			aStarts = append(aStarts, p.start)
		case strings.Contains(p.series, `"k_b"`):
			bStarts = append(bStarts, p.start)
		}
	}
	assert.Equal(t, []pcommon.Timestamp{t1}, aStarts)
	assert.Equal(t, []pcommon.Timestamp{t2, t3}, bStarts, "a new series starts at the previous flush")
	assert.Equal(t, int64(15), kernelCount(h.sink, "k_a"))
	assert.Equal(t, int64(5), kernelCount(h.sink, "k_b"))
}
