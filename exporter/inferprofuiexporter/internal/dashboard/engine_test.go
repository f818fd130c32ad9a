// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

// scrape is one scrape of an engine's /metrics as the exporter's delta step
// hands it on: vLLM's gauges, a delta preemption count and a delta TTFT
// histogram with vLLM's buckets, for two data-parallel engine cores.
func scrape(at time.Time, instance string, kv [2]float64, running, waiting, preempted int64, ttft []float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	rm.Resource().Attributes().PutStr(names.ResourceServiceInstance, instance)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ts := pcommon.NewTimestampFromTime(at)
	gauge := func(name string, vs ...float64) {
		g := ms.AppendEmpty()
		g.SetName(name)
		dps := g.SetEmptyGauge().DataPoints()
		for i, v := range vs {
			p := dps.AppendEmpty()
			p.SetTimestamp(ts)
			p.SetDoubleValue(v)
			p.Attributes().PutStr("engine", string(rune('0'+i)))
		}
	}
	gauge("vllm:kv_cache_usage_perc", kv[0], kv[1])
	gauge("vllm:num_requests_running", float64(running), 0)
	gauge("vllm:num_requests_waiting", float64(waiting), 0)
	s := ms.AppendEmpty()
	s.SetName("vllm:num_preemptions_total")
	sum := s.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	sp := sum.DataPoints().AppendEmpty()
	sp.SetTimestamp(ts)
	sp.SetDoubleValue(float64(preempted))
	h := ms.AppendEmpty()
	h.SetName("vllm:time_to_first_token_seconds")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := hh.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	bounds := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5}
	dp.ExplicitBounds().FromRaw(bounds)
	counts := make([]uint64, len(bounds)+1)
	var total float64
	for _, v := range ttft {
		i := 0
		for i < len(bounds) && v > bounds[i] {
			i++
		}
		counts[i]++
		total += v
	}
	dp.BucketCounts().FromRaw(counts)
	dp.SetCount(uint64(len(ttft)))
	dp.SetSum(total)
	return md
}

// TestEngineGaugesOverTime: KV-cache usage, running and waiting requests and
// preemptions per engine instance, per scrape; the fullest core's usage,
// the cores' requests added up.
func TestEngineGaugesOverTime(t *testing.T) {
	h := NewHistory()
	h.Add(scrape(t0, "a", [2]float64{0.25, 0.5}, 3, 1, 0, nil))
	h.Add(scrape(t0.Add(5*time.Second), "a", [2]float64{0.75, 0.125}, 8, 4, 2, nil))
	h.Add(scrape(t0, "b", [2]float64{0.1, 0}, 1, 0, 0, nil))
	d := h.Build("v", t0, t0.Add(time.Minute), nil, 0)
	require.Len(t, d.Engines, 2)
	a := d.Engines[0]
	assert.Equal(t, "vllm", a.Service)
	assert.Equal(t, "a", a.Instance)
	ms0, ms1 := float64(t0.UnixMilli()), float64(t0.Add(5*time.Second).UnixMilli())
	assert.Equal(t, [][2]float64{{ms0, 0.5}, {ms1, 0.75}}, a.KVCacheUsage)
	assert.Equal(t, [][2]float64{{ms0, 3}, {ms1, 8}}, a.Running)
	assert.Equal(t, [][2]float64{{ms0, 1}, {ms1, 4}}, a.Waiting)
	assert.Equal(t, [][2]float64{{ms0, 0}, {ms1, 2}}, a.Preemptions)
	assert.Equal(t, "b", d.Engines[1].Instance)
}

// TestEngineGaugesScrapedFasterThanASecond: a chart point is a second; with
// four scrapes in it (a 250 ms interval) running and waiting are the
// fullest scrape's, not the four added up, whether the scrapes come in one
// batch or four. The cores of one scrape still add up.
func TestEngineGaugesScrapedFasterThanASecond(t *testing.T) {
	running := []int64{3, 5, 8, 2}
	one := pmetric.NewMetrics()
	apart := NewHistory()
	for i, n := range running {
		md := scrape(t0.Add(time.Duration(i)*250*time.Millisecond), "a", [2]float64{0.1 * float64(i), 0}, n, n/2, 1, nil)
		md.ResourceMetrics().MoveAndAppendTo(one.ResourceMetrics())
		apart.Add(scrape(t0.Add(time.Duration(i)*250*time.Millisecond), "a", [2]float64{0.1 * float64(i), 0}, n, n/2, 1, nil))
	}
	together := NewHistory()
	together.Add(one)
	ms0 := float64(t0.UnixMilli())
	for name, h := range map[string]*History{"one batch": together, "four batches": apart} {
		d := h.Build("v", t0, t0.Add(time.Minute), nil, 0)
		require.Len(t, d.Engines, 1, name)
		e := d.Engines[0]
		assert.Equal(t, [][2]float64{{ms0, 8}}, e.Running, name)
		assert.Equal(t, [][2]float64{{ms0, 4}}, e.Waiting, name)
		require.Len(t, e.KVCacheUsage, 1, name)
		assert.InDelta(t, 0.3, e.KVCacheUsage[0][1], 1e-9, name)
		assert.Equal(t, [][2]float64{{ms0, 4}}, e.Preemptions, name+": deltas add up")
	}

	// Two cores in one scrape: 6 and 7 running at once are 13.
	md := scrape(t0, "b", [2]float64{}, 6, 0, 0, nil)
	for _, m := range md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().All() {
		if m.Name() == "vllm:num_requests_running" {
			m.Gauge().DataPoints().At(1).SetDoubleValue(7)
		}
	}
	h := NewHistory()
	h.Add(md)
	d := h.Build("v", t0, t0.Add(time.Minute), nil, 0)
	require.Len(t, d.Engines, 1)
	assert.Equal(t, [][2]float64{{ms0, 13}}, d.Engines[0].Running)
}

// TestLatencyFromTheEngineWithoutSpans: with tracing off no request span
// comes, so the TTFT chart shows the engine's own histogram and says so;
// once spans come, they win and the engine's stays beside as a cross-check.
func TestLatencyFromTheEngineWithoutSpans(t *testing.T) {
	h := NewHistory()
	h.Add(scrape(t0, "a", [2]float64{}, 0, 0, 0, []float64{0.03, 0.03, 0.03, 0.2}))
	d := h.Build("v", t0, t0.Add(time.Minute), nil, 0)
	assert.Equal(t, SourceEngine, d.LatencySource["ttft"])
	require.Len(t, d.Latency["ttft"], 1)
	assert.EqualValues(t, 4, d.Latency["ttft"][0].Count)
	require.NotNil(t, d.Latency["ttft"][0].P50)
	assert.InDelta(t, 0.03, *d.Latency["ttft"][0].P50, 0.02, "inside the 0.02–0.04 bucket")
	assert.Equal(t, SourceSpans, d.LatencySource["tpot"], "the engine has no TPOT histogram of this name")

	h.Add(flush(t0.Add(5*time.Second), []float64{0.5, 0.5}, 0, 2))
	d = h.Build("v", t0, t0.Add(time.Minute), nil, 0)
	assert.Equal(t, SourceSpans, d.LatencySource["ttft"])
	require.Len(t, d.Latency["ttft"], 1)
	assert.EqualValues(t, 2, d.Latency["ttft"][0].Count, "the spans' figures")
	require.Len(t, d.EngineLatency["ttft"], 1)
	assert.EqualValues(t, 4, d.EngineLatency["ttft"][0].Count, "the engine's, as a cross-check")
}

// TestLastErrors: error records (ERROR and above, and every engine record
// inferprof-run sends), newest first, at most maxErrors.
func TestLastErrors(t *testing.T) {
	h := NewHistory()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	rl.Resource().Attributes().PutStr(names.ResourceServiceInstance, "a")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	add := func(sec int, sev plog.SeverityNumber, kind, body string) {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(sec) * time.Second)))
		lr.SetSeverityNumber(sev)
		lr.Body().SetStr(body)
		if kind != "" {
			lr.Attributes().PutStr(attrEngineErrorKind, kind)
		}
	}
	add(1, plog.SeverityNumberInfo, "", "an info line is no error")
	add(2, plog.SeverityNumberError, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory")
	add(3, plog.SeverityNumberInfo, "exit", "engine exited with code 1")
	add(4, plog.SeverityNumberError, "", "XID error 79")
	h.AddErrors(CollectLogs(ld))
	d := h.Build("v", t0, t0.Add(time.Minute), nil, 0)
	require.Len(t, d.Errors, 3)
	assert.Equal(t, "XID error 79", d.Errors[0].Message)
	assert.Equal(t, "exit", d.Errors[1].Kind)
	assert.Equal(t, "cuda_oom", d.Errors[2].Kind)
	assert.Equal(t, "a", d.Errors[2].Instance)

	var many []ErrorRow
	later := t0.Add(time.Hour).UnixMilli()
	for i := range 3 * maxErrors {
		many = append(many, ErrorRow{T: later + int64(i), Message: "e"})
	}
	h.AddErrors(many)
	d = h.Build("v", t0, t0.Add(time.Minute), nil, 0)
	require.Len(t, d.Errors, maxErrors)
	assert.Equal(t, later+3*maxErrors-1, d.Errors[0].T, "newest first")
	assert.Equal(t, later+2*maxErrors, d.Errors[maxErrors-1].T, "the oldest kept")
}
