// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/exphist/exphisttest"
	"github.com/inferprof/inferprof/internal/names"
)

// connectorBounds reads a histogram's bucket boundaries from the
// inference_metrics connector's metadata.yaml, the source of the bounds the
// connector exports.
func connectorBounds(t *testing.T, metric string) []float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "connector", "inferencemetricsconnector", "metadata.yaml"))
	require.NoError(t, err)
	var md struct {
		Metrics map[string]struct {
			Histogram struct {
				Bounds []float64 `yaml:"bucket_boundaries"`
			} `yaml:"histogram"`
		} `yaml:"metrics"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &md))
	b := md.Metrics[metric].Histogram.Bounds
	require.NotEmptyf(t, b, "%s has bucket_boundaries", metric)
	return b
}

// quantileOf is the figure the dashboard must show for the q-quantile of
// values exported as a histogram with these bounds, following
// local.Quantile's documented estimate: values fall in upper-inclusive
// buckets, the overflow into the last bound; among the non-empty buckets,
// the one holding rank ceil(q·n) is interpolated linearly from the previous
// non-empty bucket's bound (the minimum for the first) to its own bound (the
// maximum for the last), clamped to [min, max].
func quantileOf(values, bounds []float64, q float64) float64 {
	counts := map[float64]int{}
	for _, v := range values {
		i, _ := slices.BinarySearch(bounds, v)
		counts[bounds[min(i, len(bounds)-1)]]++
	}
	bins := make([]float64, 0, len(counts))
	for b := range counts {
		bins = append(bins, b)
	}
	slices.Sort(bins)
	lo, hi := slices.Min(values), slices.Max(values)
	rank := max(int(math.Ceil(q*float64(len(values)))), 1)
	before, i := 0, len(bins)-1
	for j, b := range bins {
		if before+counts[b] >= rank {
			i = j
			break
		}
		before += counts[b]
	}
	from, to := lo, bins[i]
	if i > 0 {
		from = max(bins[i-1], lo)
	}
	if i == len(bins)-1 {
		to = max(hi, bins[i])
	}
	to = min(to, hi)
	frac := min(max((q*float64(len(values))-float64(before))/float64(counts[bins[i]]), 0), 1)
	return from + frac*(to-from)
}

// chartPoint is one drawn point or bar part, as its data-* attributes say.
type chartPoint struct {
	T     float64 `json:"t"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Count float64 `json:"count"`
}

// chartPoints reads the points drawn under sel.
func chartPoints(t *testing.T, ctx context.Context, sel string) []chartPoint {
	t.Helper()
	pts, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartPoint](fmt.Sprintf(
		`Array.from(document.querySelectorAll(%q)).map((e) => ({t: +e.dataset.t, name: e.dataset.series || e.dataset.part,
		  value: +e.dataset.value, count: e.dataset.count === undefined ? -1 : +e.dataset.count}))`, sel)))
	require.NoError(t, err)
	return pts
}

// itlGaps rebuilds every successful request's inter-token gaps from the
// engine steps: the batches the fake engine ran (which request got tokens
// in which step) and the step times its hook sent, as the timeline holds
// them (the hook's clock times the steps, not the test).
func itlGaps(t *testing.T, addr string, engine driveOutput, tr traffic) []float64 {
	t.Helper()
	var doc struct {
		TraceEvents []timelineEvent `json:"traceEvents"`
	}
	require.True(t, getJSON(t, "http://"+addr+"/timeline?last=10m", &doc))
	type step struct{ index, end float64 }
	var steps []step
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Cat == "engine.step" {
			steps = append(steps, step{e.Args["step"].(float64), e.Ts + e.Dur})
		}
	}
	slices.SortFunc(steps, func(a, b step) int { return int(a.index - b.index) })
	require.Len(t, steps, len(engine.Steps), "the timeline holds every step the hook sent")
	failed := map[string]bool{}
	for _, r := range tr.requests {
		failed[r.id] = r.failed
	}
	times := map[string][]float64{}
	for i, b := range engine.Steps {
		for j, id := range b.RequestIDs {
			if b.RequestTokens[j] > 0 && !failed[id] {
				times[id] = append(times[id], steps[i].end/1e6)
			}
		}
	}
	var gaps []float64
	for _, ts := range times {
		for i := 1; i < len(ts); i++ {
			gaps = append(gaps, ts[i]-ts[i-1])
		}
	}
	require.NotEmpty(t, gaps)
	return gaps
}

// checkLatencyCharts checks the TTFT, TPOT, ITL and e2e charts: all the
// traffic lands in one flush, so each chart has one point per percentile,
// counting every sample sent, within 2% of the exact percentile of the sent
// values (the dashboard reads the connector's exponential twins).
func checkLatencyCharts(t *testing.T, ctx context.Context, addr string, engine driveOutput, tr traffic) {
	t.Helper()
	var ttft, tpot, e2e []float64
	for _, r := range tr.requests {
		e2e = append(e2e, r.e2e) // failed requests included, with error.type
		if !r.failed {
			ttft = append(ttft, r.ttft)
			tpot = append(tpot, r.tpot())
		}
	}
	charts := []struct {
		key    string
		metric string
		values []float64
		delta  float64
	}{
		{"ttft", names.MetricTimeToFirstToken, ttft, 1e-9},
		{"tpot", names.MetricTimePerOutputToken, tpot, 1e-9},
		// Step times travel as microseconds in the timeline JSON.
		{"itl", names.MetricInterTokenLatency, itlGaps(t, addr, engine, tr), 1e-6},
		{"e2e", names.MetricRequestDuration, e2e, 1e-9},
	}
	for _, c := range charts {
		for _, q := range []struct {
			series string
			q      float64
		}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}} {
			pts := chartPoints(t, ctx, fmt.Sprintf(`#chart-%s svg circle[data-series=%q]`, c.key, q.series))
			require.Lenf(t, pts, 1, "%s %s: one flush", c.key, q.series)
			assert.EqualValuesf(t, len(c.values), pts[0].Count, "%s samples", c.key)
			// Read from the connector's exponential twin: within 2% of the
			// exact percentile (plus the timeline's µs rounding for ITL).
			exact := exphisttest.NearestRank(c.values, q.q)
			assert.InDeltaf(t, exact, pts[0].Value, 0.02*exact+c.delta, "%s %s", c.key, q.series)
		}
	}
	// The TTFT tile is the last flush's p50.
	v, err := attr(ctx, "#tile-ttft", "data-value")
	require.NoError(t, err)
	assert.InDelta(t, exphisttest.NearestRank(ttft, 0.5), num(t, v), 0.02*exphisttest.NearestRank(ttft, 0.5), "TTFT tile")
}

// checkStackedCharts checks the phase bars (mean seconds per request in each
// phase, failed requests included) and the goodput bars.
func checkStackedCharts(t *testing.T, ctx context.Context, tr traffic) {
	t.Helper()
	var queue, prefill, decode, other float64
	for _, r := range tr.requests {
		queue += r.queue
		prefill += r.prefill
		decode += r.decode
		other += r.e2e - r.queue - r.prefill - r.decode
	}
	n := float64(len(tr.requests))
	want := map[string]float64{"queue": queue / n, "prefill": prefill / n, "decode": decode / n, "other": other / n}
	pts := chartPoints(t, ctx, `#chart-phases svg rect[data-part]`)
	require.Len(t, pts, len(want), "one bar, a part per phase")
	for _, p := range pts {
		assert.Equalf(t, pts[0].T, p.T, "one flush")
		assert.InDeltaf(t, want[p.Name], p.Value, 1e-9, "mean %s", p.Name)
	}

	total, failed, good := tr.counts()
	wantGood := map[string]float64{"good": float64(good), "missed": float64(total - failed - good), "failed": float64(failed)}
	pts = chartPoints(t, ctx, `#chart-goodput svg rect[data-part]`)
	require.Len(t, pts, len(wantGood), "one bar: met, missed, failed")
	for _, p := range pts {
		assert.Equalf(t, wantGood[p.Name], p.Value, "goodput %s", p.Name)
	}
}

// checkSlowest checks the slowest-requests table: every request sent,
// longest first, each with its figures and its breakdown bar.
func checkSlowest(t *testing.T, ctx context.Context, tr traffic) {
	t.Helper()
	sorted := slices.Clone(tr.requests)
	slices.SortFunc(sorted, func(a, b sentRequest) int { return cmp.Compare(b.e2e, a.e2e) })
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#slowest tbody tr[data-request-id]")).map((e) => e.dataset.requestId)`))
	require.NoError(t, err)
	var want []string
	for _, r := range sorted[:min(10, len(sorted))] {
		want = append(want, r.id)
	}
	assert.Equal(t, want, ids, "slowest first")
	for _, r := range sorted[:min(10, len(sorted))] {
		row := fmt.Sprintf(`#slowest tbody tr[data-request-id=%q]`, r.id)
		figure := func(name string) float64 {
			v, err := attr(ctx, row, name)
			require.NoErrorf(t, err, "%s %s", r.id, name)
			return num(t, v)
		}
		phases := map[string]float64{"queue": r.queue, "prefill": r.prefill, "decode": r.decode,
			"other": r.e2e - r.queue - r.prefill - r.decode}
		assert.InDeltaf(t, r.e2e, figure("data-e2e"), 1e-9, "%s e2e", r.id)
		assert.InDeltaf(t, r.ttft, figure("data-ttft"), 1e-9, "%s ttft", r.id)
		assert.InDeltaf(t, float64(r.outTokens), figure("data-output-tokens"), 0, "%s tokens", r.id)
		if !r.failed {
			assert.InDeltaf(t, r.tpot(), figure("data-tpot"), 1e-9, "%s tpot", r.id)
		} else {
			e, err := attr(ctx, row, "data-error")
			require.NoError(t, err)
			assert.NotEmptyf(t, e, "%s is marked failed", r.id)
		}
		for phase, v := range phases {
			assert.InDeltaf(t, v, figure("data-"+phase), 1e-9, "%s %s", r.id, phase)
			s, err := attr(ctx, row+fmt.Sprintf(` .breakdown span[data-phase=%q]`, phase), "data-seconds")
			require.NoErrorf(t, err, "%s breakdown has %s", r.id, phase)
			assert.InDeltaf(t, v, num(t, s), 1e-9, "%s breakdown %s", r.id, phase)
		}
	}
}
