// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/privacy"
)

// realDir holds the graphsignal 1.1.2 side (graphsignaltest/real).
const realDir = "graphsignaltest/real"

type realInput struct {
	Ticks []struct {
		Gauges []struct {
			Name  string            `json:"name"`
			Tags  map[string]string `json:"tags"`
			Value float64           `json:"value"`
		} `json:"gauges"`
		Counters []struct {
			Name  string            `json:"name"`
			Tags  map[string]string `json:"tags"`
			Total float64           `json:"total"`
		} `json:"counters"`
		Histograms []struct {
			Name         string            `json:"name"`
			Tags         map[string]string `json:"tags"`
			Bounds       []float64         `json:"bounds"`
			BucketCounts []uint64          `json:"bucket_counts"`
			Count        uint64            `json:"count"`
			Sum          float64           `json:"sum"`
			Min          *float64          `json:"min"`
			Max          *float64          `json:"max"`
		} `json:"histograms"`
		Summaries []struct {
			Name  string            `json:"name"`
			Tags  map[string]string `json:"tags"`
			Count uint64            `json:"count"`
			Sum   float64           `json:"sum"`
		} `json:"summaries"`
		Profiles []struct {
			Name   string               `json:"name"`
			Frames map[string][2]uint64 `json:"frames"`
		} `json:"profiles"`
	} `json:"ticks"`
	Logs []struct {
		Level     string `json:"level"`
		Message   string `json:"message"`
		Exception string `json:"exception"`
	} `json:"logs"`
	Expiry []struct {
		Name string `json:"name"`
		AgeS int64  `json:"age_s"`
	} `json:"expiry"`
	Resource map[string]any `json:"resource"`
}

func readRealInput(t *testing.T) realInput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realDir, "testdata", "signals_input.json"))
	require.NoError(t, err)
	var in realInput
	require.NoError(t, json.Unmarshal(b, &in))
	return in
}

// realMetrics is tick i of the input as OTLP: cumulative points from
// start, and the profile as the cupti receiver's delta tables.
func realMetrics(in realInput, i int, start time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", in.Resource["host.name"].(string))
	rm.Resource().Attributes().PutInt("process.pid", int64(in.Resource["process.pid"].(float64)))
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	st := pcommon.NewTimestampFromTime(start)
	ts := pcommon.NewTimestampFromTime(start.Add(time.Duration(i+1) * time.Second))
	attrs := func(m pcommon.Map, tags map[string]string) {
		for k, v := range tags {
			m.PutStr(k, v)
		}
	}
	tick := in.Ticks[i]
	for _, g := range tick.Gauges {
		m := ms.AppendEmpty()
		m.SetName(g.Name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(g.Value)
		attrs(dp.Attributes(), g.Tags)
	}
	for _, c := range tick.Counters {
		m := ms.AppendEmpty()
		m.SetName(c.Name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(st)
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(c.Total)
		attrs(dp.Attributes(), c.Tags)
	}
	for _, h := range tick.Histograms {
		m := ms.AppendEmpty()
		m.SetName(h.Name)
		hh := m.SetEmptyHistogram()
		hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := hh.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(st)
		dp.SetTimestamp(ts)
		dp.ExplicitBounds().FromRaw(h.Bounds)
		dp.BucketCounts().FromRaw(h.BucketCounts)
		dp.SetCount(h.Count)
		dp.SetSum(h.Sum)
		if h.Min != nil {
			dp.SetMin(*h.Min)
		}
		if h.Max != nil {
			dp.SetMax(*h.Max)
		}
		attrs(dp.Attributes(), h.Tags)
	}
	for _, s := range tick.Summaries {
		m := ms.AppendEmpty()
		m.SetName(s.Name)
		dp := m.SetEmptySummary().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(st)
		dp.SetTimestamp(ts)
		dp.SetCount(s.Count)
		dp.SetSum(s.Sum)
		attrs(dp.Attributes(), s.Tags)
	}
	for _, p := range tick.Profiles {
		dur, cnt := deltaSum(ms, names.MetricKernelDuration, "s"), deltaSum(ms, names.MetricKernelCount, "{kernel}")
		kernels := make([]string, 0, len(p.Frames))
		for k := range p.Frames {
			kernels = append(kernels, k)
		}
		sort.Strings(kernels)
		for _, k := range kernels {
			v := p.Frames[k]
			if i > 0 {
				prev := in.Ticks[i-1].Profiles[0].Frames[k]
				v = [2]uint64{v[0] - prev[0], v[1] - prev[1]}
			}
			for j, dps := range []pmetric.NumberDataPointSlice{dur, cnt} {
				dp := dps.AppendEmpty()
				dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(i) * time.Second)))
				dp.SetTimestamp(ts)
				if j == 0 {
					dp.SetDoubleValue(float64(v[0]) / 1e9)
				} else {
					dp.SetIntValue(int64(v[1]))
				}
				dp.Attributes().PutStr(names.AttrKernelName, k)
			}
		}
	}
	return md
}

func realLogs(in realInput) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", in.Resource["host.name"].(string))
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	sev := map[string]plog.SeverityNumber{"info": plog.SeverityNumberInfo, "warning": plog.SeverityNumberWarn, "error": plog.SeverityNumberError}
	for _, e := range in.Logs {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		lr.SetSeverityNumber(sev[e.Level])
		lr.Body().SetStr(e.Message)
		if e.Exception != "" {
			lr.Attributes().PutStr("exception.stacktrace", e.Exception)
		}
	}
	return ld
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// What inferprof's /signals adds to Graphsignal's, each explained in the
// README (Local API): its own name in profiler; more percentiles with the
// method and its error bound.
var signalsExtra = map[string][]string{
	"profiler":  {"name"},
	"histogram": {"p90", "p99", "quantile_method", "relative_error", "p50_bucket", "p95_bucket"},
}

func byNameType(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range doc["metrics"].([]any) {
		mm := m.(map[string]any)
		out[mm["name"].(string)+"/"+mm["type"].(string)] = mm
	}
	return out
}

// assertSubsetTags checks that Graphsignal's tags are all in ours; ours
// may add the resource's and the context's, which inferprof keeps on each
// series because one collector holds many hosts and processes.
func assertSubsetTags(t *testing.T, where string, real, ours any, allowed ...string) {
	t.Helper()
	rt, ot := real.(map[string]any), ours.(map[string]any)
	for k, v := range rt {
		assert.Equal(t, v, ot[k], "%s: tag %s", where, k)
	}
	for k := range ot {
		if _, ok := rt[k]; !ok {
			assert.Contains(t, allowed, k, "%s: tag %s Graphsignal does not put here", where, k)
		}
	}
}

// TestSignalsAgainstGraphsignal feeds testdata/signals_input.json to the
// exporter (as OTLP) and to graphsignal 1.1.2's own stores and SignalsEndpoint
// (signals_real.py) and compares the two /signals documents field by field.
// The venv is make test-graphsignal-real's (INFERPROF_GRAPHSIGNAL_VENV).
func TestSignalsAgainstGraphsignal(t *testing.T) {
	venv := os.Getenv("INFERPROF_GRAPHSIGNAL_VENV")
	if venv == "" {
		t.Skip("INFERPROF_GRAPHSIGNAL_VENV unset: make test-graphsignal-real builds graphsignal 1.1.2's venv and sets it")
	}
	in := readRealInput(t)

	cmd := exec.CommandContext(t.Context(), filepath.Join(venv, "bin", "python"), "signals_real.py", filepath.Join("testdata", "signals_input.json"))
	cmd.Dir = realDir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "graphsignal's own /signals")
	var real map[string]any
	require.NoError(t, json.Unmarshal(out, &real))

	h := newHarness(t, func(c *Config) { c.Names = encode.NamesGraphsignal })
	start := time.Now()
	for i := range in.Ticks {
		require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), realMetrics(in, i, start)))
	}
	require.NoError(t, h.logsExp.ConsumeLogs(t.Context(), realLogs(in)))
	resp, err := http.Get(h.localURL() + "/signals")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	var ours map[string]any
	require.NoError(t, json.Unmarshal(body, &ours))

	assert.Equal(t, keys(real), keys(ours), "top-level keys")
	assert.ElementsMatch(t, append(keys(real["profiler"].(map[string]any)), signalsExtra["profiler"]...), keys(ours["profiler"].(map[string]any)))
	for _, k := range []string{"payload_ns", "start_ns"} {
		assert.Greater(t, ours[k].(float64), 1e18, "%s in epoch ns", k)
	}
	assert.Contains(t, ours["context"], "instance.id")

	rm, om := byNameType(t, real), byNameType(t, ours)
	for key, r := range rm {
		if r["name"] == "fresh_gauge" {
			continue // fed only to Graphsignal, for the ten-minute drop below
		}
		o, ok := om[key]
		if r["type"] == "counter" && r["stats"].(map[string]any)["total"] == 0.0 {
			// The store is fed the uploads' deltas, and a counter that never
			// moved has none: it appears once it does (README, Local API).
			assert.False(t, ok, "%s: a counter that only read 0", key)
			continue
		}
		if !assert.True(t, ok, "%s: Graphsignal serves it, inferprof does not", key) {
			continue
		}
		assert.Equal(t, keys(r), keys(o), "%s: record keys", key)
		assert.Greater(t, o["updated_ns"].(float64), 1e18, "%s: updated_ns", key)
		assertSubsetTags(t, key, r["tags"], o["tags"], "instance.id", "deployment", "host.name", "process.pid", "hw.id")
		rs, os := r["stats"].(map[string]any), o["stats"].(map[string]any)
		assert.ElementsMatch(t, append(keys(rs), signalsExtra[r["type"].(string)]...), keys(os), "%s: stats keys", key)
		for _, sk := range keys(rs) {
			switch sk {
			case "p50", "p95":
				// Graphsignal reads the bin value of the bucket holding rank
				// ceil(q*count); inferprof interpolates inside that bucket,
				// whose bounds it gives as pNN_bucket (README, Local API).
				if rs[sk] == nil {
					assert.Nil(t, os[sk], "%s: %s null on both", key, sk)
					continue
				}
				b := os[sk+"_bucket"].([]any)
				rv := rs[sk].(float64)
				if b[0] != nil {
					assert.LessOrEqual(t, b[0].(float64), rv, "%s: Graphsignal's %s in our bucket", key, sk)
				}
				if b[1] != nil {
					assert.GreaterOrEqual(t, b[1].(float64), rv, "%s: Graphsignal's %s in our bucket", key, sk)
				}
				assert.Contains(t, rs["bins"], rs[sk], "%s: Graphsignal's %s is a bin", key, sk)
			default:
				assert.Equal(t, rs[sk], os[sk], "%s: stats.%s", key, sk)
			}
		}
	}

	re, oe := real["errors"].([]any), ours["errors"].([]any)
	if assert.Len(t, oe, len(re), "errors: warning and above") {
		for i := range re {
			r, o := re[i].(map[string]any), oe[i].(map[string]any)
			assert.Equal(t, keys(r), keys(o), "errors[%d] keys", i)
			for _, k := range []string{"level", "message"} {
				assert.Equal(t, r[k], o[k], "errors[%d].%s", i, k)
			}
			if r["exception"] == nil {
				assert.Nil(t, o["exception"], "errors[%d].exception null on both", i)
			} else {
				// Error text can quote prompts; inferprof sends a marker in
				// its place (README, Privacy).
				assert.Contains(t, o["exception"], privacy.ErrorTextMarker, "errors[%d].exception", i)
			}
			assert.Greater(t, o["log_ns"].(float64), 1e18)
			assertSubsetTags(t, "errors", r["tags"], o["tags"], "instance.id", "deployment", "host.name")
		}
	}

	rr, or := real["resources"].([]any), ours["resources"].([]any)
	kinds := func(rs []any) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, r := range rs {
			m[r.(map[string]any)["kind"].(string)] = r.(map[string]any)
		}
		return m
	}
	rk, ok := kinds(rr), kinds(or)
	assert.Equal(t, keys(map[string]any{"host": 0, "process": 0}), keys(toAny(ok)), "resource kinds")
	for kind, r := range rk {
		o := ok[kind]
		if !assert.NotNil(t, o, kind) {
			continue
		}
		assert.Equal(t, keys(r), keys(o), "%s resource keys", kind)
		for _, k := range []string{"first_seen_ts", "last_seen_ts"} {
			v := o[k].(float64)
			assert.Less(t, v, 1e11, "%s.%s in seconds", kind, k)
			assert.Equal(t, float64(int64(v)), v, "%s.%s whole seconds, as Graphsignal's // 1e9", kind, k)
		}
		assertSubsetTags(t, kind, r["tags"], o["tags"], "instance.id", "deployment", "host.name")
	}

	// The ten-minute drop: Graphsignal forgets a series whose last
	// measurement is older than METRIC_EXPIRY_NS (600 s); so does the store,
	// counted from its last update.
	now := time.Now()
	clock := now
	st := local.New("test", nil, func() time.Time { return clock })
	for _, e := range in.Expiry {
		clock = now.Add(-time.Duration(e.AgeS) * time.Second)
		st.Apply(&signalsv1.UploadRequest{Metrics: []*signalsv1.Metric{{
			Name: e.Name, Type: signalsv1.Metric_GAUGE_METRIC,
			Datapoints: []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Gauge{Gauge: 1}}},
		}}})
	}
	clock = now
	served := map[string]bool{}
	for _, m := range st.Snapshot().Metrics {
		served[m.Name] = true
	}
	for _, e := range in.Expiry {
		_, realHas := rm[e.Name+"/gauge"]
		assert.Equal(t, realHas, served[e.Name], "%s, %d s old: Graphsignal serves it %v", e.Name, e.AgeS, realHas)
	}
	assert.True(t, served["fresh_gauge"])
	assert.False(t, served["stale_gauge"])
}

func toAny(m map[string]map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
