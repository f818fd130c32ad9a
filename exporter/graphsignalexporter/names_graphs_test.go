// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

// graphMetrics is one interval of the cupti receiver's graph tables for
// the given signatures (each 1 ms and 1 launch), plus a duration point
// without a signature, as a collector that predates signatures sends it.
func graphMetrics(ts time.Time, sigs []string, unsigned float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutInt("process.pid", 4242)
	rm.Resource().Attributes().PutStr("inferprof.cupti.graph_mode", "graph")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	point := func(dps pmetric.NumberDataPointSlice) pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(ts.Add(-10 * time.Second)))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.Attributes().PutInt(names.AttrCUDADeviceOrdinal, 0)
		return dp
	}
	dur, cnt := deltaSum(ms, names.MetricGraphDuration, "s"), deltaSum(ms, names.MetricGraphCount, "{launch}")
	if unsigned > 0 { // first, as the receiver emits unknown first
		point(dur).SetDoubleValue(unsigned)
	}
	for _, sig := range sigs {
		d := point(dur)
		d.SetDoubleValue(0.001)
		d.Attributes().PutStr(names.AttrCUDAGraphSignature, sig)
		c := point(cnt)
		c.SetIntValue(1)
		c.Attributes().PutStr(names.AttrCUDAGraphSignature, sig)
	}
	return md
}

// cuda_graphs_nanoseconds keeps Graphsignal's 250-frame cap, as the other
// profiles do: past 249 signatures the rest are summed in "other", with
// their launches; a point without a signature is "unknown", not lost.
func TestGraphsignalGraphFramesCapped(t *testing.T) {
	h := graphsignalHarness(t, nil)
	sigs := make([]string, 260)
	for i := range sigs {
		sigs[i] = fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), graphMetrics(time.Now(), sigs, 0.002)))
	require.Empty(t, h.srv.Malformed())
	gp := metricsNamed(uploadsOf(h), "cuda_graphs_nanoseconds")
	require.Len(t, gp, 1)
	assert.Len(t, gp[0].Frames, 250)
	fv := frameValues(gp[0])
	var ns, launches uint64
	for _, v := range fv {
		ns += v[0]
		launches += v[1]
	}
	assert.Equal(t, uint64(260*1_000_000+2_000_000), ns, "frame values sum to the graph time")
	assert.Equal(t, uint64(260), launches)
	assert.Equal(t, [2]uint64{2_000_000, 0}, fv["unknown"], "no signature: unknown")
	// unknown and 248 signatures keep their frames (249 named, then
	// "other"); the last 12 signatures fold.
	assert.Equal(t, [2]uint64{12 * 1_000_000, 12}, fv["other"])
	assert.InDelta(t, 0.0, gaugeOf(t, uploadsOf(h), "cuda_graph_trace_mode"), 0)
}
