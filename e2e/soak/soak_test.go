// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package soak runs the built collector on config/graphsignal.yaml under
// sustained load and faults, and checks that nothing is lost: request spans
// over OTLP, engine step records (rings and datagrams), CUPTI kernel
// records, a Graphsignal outage, a SIGKILL, malformed input on every
// listener and memory pressure.
// SOAK_DURATION sets the load phase (`make test` runs 30s; `make soak` runs
// 5m and writes the figures to SOAK_REPORT).
package soak

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// The targets the issue names.
const (
	spanRate   = 20_000
	engines    = 4
	stepRate   = 200
	cuptiRate  = 1_000_000
	spansPerRq = 500
)

// The soak gives the collector a budget of budgetMiB, as
// docs/deployment.md tells a host without a container limit to:
// INFERPROF_MEMORY_LIMIT_MIB (memory_limiter's limit_mib in the shipped
// configs; its spike limit is then 20% of it) and GOMEMLIMIT both at 80% of
// the budget, the shares deploy/ gives them of a container's limit. The
// shipped percentages alone would be of the host's memory (24 GiB here),
// which no phase reaches.
const (
	budgetMiB = 1024
	limitMiB  = budgetMiB * 80 / 100
)

var defaultGOMEMLIMIT = fmt.Sprintf("%dMiB", budgetMiB*80/100)

type run struct {
	t        *testing.T
	ports    *e2etest.Ports
	srv      *graphsignaltest.Server
	dataDir  string
	sockDir  string
	kineto   string
	files    []string
	env      []string
	c        *e2etest.Collector
	p        *proc
	report   []string
	duration time.Duration
	// spikeMiB is memory_limiter's spike limit (SOAK_SPIKE_MIB, else its
	// default for limit_mib: 20% of it).
	spikeMiB int
	// gomemlimit is the collector's GOMEMLIMIT; the memory phase asserts
	// the RSS bound only under the default, the mechanism deploy/ ships.
	gomemlimit string
}

// soakDuration reads SOAK_DURATION. The soak saturates the machine, so it
// does not run beside the other packages of `go test ./...`: `make test`
// runs it on its own afterwards (30s), `make soak` for longer.
func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("SOAK_DURATION")
	if s == "" {
		t.Skip("set SOAK_DURATION (make test runs 30s after the other tests; make soak runs 5m)")
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "SOAK_DURATION")
	return d
}

// phaseWanted says whether SOAK_PHASES (a comma-separated list; empty: all)
// names phase, so one phase can be rerun alone while tuning it.
func phaseWanted(phase string) bool {
	v := os.Getenv("SOAK_PHASES")
	return v == "" || slices.Contains(strings.Split(v, ","), phase)
}

func TestSoak(t *testing.T) {
	r := &run{t: t, ports: e2etest.NewPorts(t), srv: graphsignaltest.NewServer(t), dataDir: t.TempDir(), duration: soakDuration(t)}
	var err error
	r.sockDir, err = os.MkdirTemp("", "soak") // short: socket paths are limited to 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(r.sockDir) })
	r.kineto = filepath.Join(r.dataDir, "kineto")
	require.NoError(t, os.Mkdir(r.kineto, 0o700))
	r.files = []string{filepath.Join(e2etest.RepoRoot(), "config", "graphsignal.yaml")}
	r.env = []string{
		"INFERPROF_OTLP_GRPC_ENDPOINT=" + r.ports.Addr("otlp_grpc"),
		"INFERPROF_OTLP_HTTP_ENDPOINT=" + r.ports.Addr("otlp_http"),
		"INFERPROF_HEALTH_ENDPOINT=" + r.ports.Addr("health"),
		"INFERPROF_PROMETHEUS_ENDPOINT=" + r.ports.Addr("prometheus"),
		fmt.Sprintf("INFERPROF_TELEMETRY_PORT=%d", r.ports.Port("telemetry")),
		"INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT=" + r.ports.Addr("graphsignal_local"),
		"INFERPROF_UI_ENDPOINT=" + r.ports.Addr("ui"),
		"INFERPROF_DATA_DIR=" + r.dataDir,
		"INFERPROF_CUPTI_ENDPOINT=" + filepath.Join(r.sockDir, "cupti.sock"),
		"INFERPROF_STEP_ENDPOINT=" + filepath.Join(r.sockDir, "step.sock"),
		"INFERPROF_KINETO_DIR=" + r.kineto,
		"INFERPROF_CUPTI_INTERVAL=1s",
		"INFERPROF_METRICS_FLUSH_INTERVAL=1s",
		"GRAPHSIGNAL_API_KEY=soak-key",
		"GRAPHSIGNAL_ENDPOINT=" + r.srv.URL,
		fmt.Sprintf("INFERPROF_MEMORY_LIMIT_MIB=%d", limitMiB),
	}
	// SOAK_GOMEMLIMIT replaces the collector's GOMEMLIMIT (not the test
	// process's); "off" runs it without one, to measure what it bounds.
	r.gomemlimit = cmp.Or(os.Getenv("SOAK_GOMEMLIMIT"), defaultGOMEMLIMIT)
	r.env = append(r.env, "GOMEMLIMIT="+r.gomemlimit)
	// SOAK_SPIKE_MIB sets memory_limiter's spike limit (the shipped configs'
	// INFERPROF_MEMORY_SPIKE_MIB): with GOMEMLIMIT about 180 MiB (the binary's pages and slack) under
	// limit_mib, the soft limit must be further below GOMEMLIMIT for the
	// limiter to see the heap reach it (docs/deployment.md, Memory).
	r.spikeMiB = limitMiB / 5
	if v := os.Getenv("SOAK_SPIKE_MIB"); v != "" {
		r.spikeMiB, err = strconv.Atoi(v)
		require.NoError(t, err, "SOAK_SPIKE_MIB")
		r.env = append(r.env, "INFERPROF_MEMORY_SPIKE_MIB="+v)
	}
	r.start()
	r.addf("Run: `SOAK_DURATION=%s SOAK_PHASES=%s`, config/graphsignal.yaml with a %d MiB budget: memory_limiter limit_mib %d (spike %d), GOMEMLIMIT=%s; %d CPUs, load average %s at the start.",
		r.duration, os.Getenv("SOAK_PHASES"), budgetMiB, limitMiB, r.spikeMiB, r.gomemlimit, numCPU(), loadAverage())

	for _, ph := range []struct {
		name string
		fn   func(*testing.T)
	}{{"load", r.load}, {"outage", r.outage}, {"malformed", r.malformed}, {"crash", r.crash}, {"memory", r.memory}} {
		if phaseWanted(ph.name) {
			t.Run(ph.name, ph.fn)
		}
	}

	r.c.Stop()
	r.p.close()
	r.addf("\nLoad average at the end: %s.", loadAverage())
	text := strings.Join(r.report, "\n") + "\n"
	t.Log("\n" + text)
	if out := os.Getenv("SOAK_REPORT"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(text), 0o644))
	}
}

func (r *run) start() {
	r.c = e2etest.Start(r.t, e2etest.Options{ConfigFiles: r.files, Env: r.env})
	r.p = newProc(r.c.PID())
}

func (r *run) addf(format string, args ...any) {
	r.report = append(r.report, fmt.Sprintf(format, args...))
}

func (r *run) telemetry(t *testing.T) series {
	t.Helper()
	s, err := scrape(r.ports.Addr("telemetry"))
	require.NoError(t, err)
	return s
}

// alive checks the health endpoint answers 200.
func (r *run) alive(t *testing.T) {
	t.Helper()
	resp, err := http.Get("http://" + r.ports.Addr("health") + "/")
	require.NoError(t, err, "the collector is down")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, r.c.Exited(), "the collector exited")
}

// requestsCounted sums inferprof.server.requests over the Prometheus scrape:
// each request span that went all the way through the inference processor
// and connector.
func (r *run) requestsCounted() float64 {
	s, err := scrape(r.ports.Addr("prometheus"))
	if err != nil {
		return -1
	}
	return s.sum("inferprof_server_requests_total")
}

func (r *run) load(t *testing.T) {
	spans := &spanSender{url: "http://" + r.ports.Addr("otlp_http") + "/v1/traces", batches: spanBatches(64, spansPerRq), per: spansPerRq}
	steps := &stepEngines{sock: filepath.Join(r.sockDir, "step.sock")}
	cupti := &cuptiClients{sock: filepath.Join(r.sockDir, "cupti.sock")}
	before := r.telemetry(t)
	baseSpans := before.sum("otelcol_receiver_accepted_spans", `receiver="otlp"`)
	baseSteps := before.sum("otelcol_receiver_engine_step_steps")
	baseRecords := before.sum("otelcol_receiver_cupti_records")

	ctx, cancel := context.WithTimeout(t.Context(), r.duration)
	defer cancel()
	cpu0, t0 := r.p.cpuSeconds(), time.Now()
	errs := make(chan error, 3)
	go func() { errs <- spans.run(ctx, spanRate, 4) }()
	go func() { errs <- steps.run(ctx, engines, stepRate) }()
	go func() { errs <- cupti.run(ctx, 2, cuptiRate) }()
	for range 3 {
		require.NoError(t, <-errs)
	}
	elapsed := time.Since(t0).Seconds()
	cpu := (r.p.cpuSeconds() - cpu0) / elapsed
	r.alive(t)

	// Nothing lost: every span the receiver accepted was counted by the
	// connector, every step record written became a step span, every record
	// written was decoded.
	var s series
	require.Eventually(t, func() bool {
		s = r.telemetry(t)
		return s.sum("otelcol_receiver_accepted_spans", `receiver="otlp"`)-baseSpans == float64(spans.accepted.Load()) &&
			s.sum("otelcol_receiver_engine_step_steps")-baseSteps == float64(steps.sent.Load()) &&
			s.sum("otelcol_receiver_cupti_records")-baseRecords == float64(cupti.records.Load()) &&
			r.requestsCounted() == float64(spans.accepted.Load())
	}, 3*time.Minute, 500*time.Millisecond, "accepted spans %d, steps sent %d, records sent %d", spans.accepted.Load(), steps.sent.Load(), cupti.records.Load())
	assert.Zero(t, s.sum("otelcol_receiver_cupti_bad_connections"))
	assert.Zero(t, s.sum("otelcol_receiver_engine_step_bad_datagrams"))
	assert.Equal(t, float64(spans.refused.Load()*spansPerRq), s.sum("otelcol_receiver_refused_spans", `receiver="otlp"`),
		"every refused batch is counted by the receiver")

	med, _ := r.p.rssStats()
	peak, err := r.p.peakRSS()
	require.NoError(t, err)
	r.addf("\n### Load (%s)\n", r.duration)
	r.addf("| stream | target | reached | lost |")
	r.addf("|---|---|---|---|")
	r.addf("| vLLM request spans, OTLP/HTTP | %d/s | %.0f/s (%d accepted, %d batches refused then resent) | 0 (all %d counted by inference_metrics) |",
		spanRate, float64(spans.accepted.Load())/elapsed, spans.accepted.Load(), spans.refused.Load(), spans.accepted.Load())
	r.addf("| engine step records through shared-memory rings, %d engines | %d/s each | %.0f/s each (%d written, %d dropped at the writer, ring full, as the hook would) | 0 |",
		engines, stepRate, float64(steps.sent.Load())/elapsed/engines, steps.sent.Load(), steps.dropped.Load())
	r.addf("| CUPTI kernel records, 2 connections | %d/s | %.0f/s (%d) | 0 |", cuptiRate, float64(cupti.records.Load())/elapsed, cupti.records.Load())
	r.addf("\nCollector CPU %.2f cores; RSS median %.0f MiB, peak %.0f MiB (memory_limiter limit_mib %d, GOMEMLIMIT %s, budget %d MiB).", cpu, med, peak, limitMiB, r.gomemlimit, budgetMiB)
	r.dropReport(s)
}

func (r *run) dropReport(s series) {
	drops := s.dropCounters()
	var parts []string
	for _, name := range sortedKeys(drops) {
		parts = append(parts, fmt.Sprintf("`%s` %.0f", name, drops[name]))
	}
	r.addf("\nDrop counters (:8888): %s.", strings.Join(parts, ", "))
}

// seqBatch is n gauge points whose values are unique across batches, so the
// Graphsignal side can tell a lost point from a duplicate.
func seqBatch(name string, batch, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	dps := m.SetEmptyGauge().DataPoints()
	for i := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(1 + batch))
		dp.SetDoubleValue(float64(batch*n + i))
		dp.Attributes().PutInt("point", int64(i))
	}
	return md
}

func (r *run) postSeq(t *testing.T, name string, batch, n int) {
	t.Helper()
	body, err := pmetricotlp.NewExportRequestFromMetrics(seqBatch(name, batch, n)).MarshalProto()
	require.NoError(t, err)
	for {
		resp, err := http.Post("http://"+r.ports.Addr("otlp_http")+"/v1/metrics", "application/x-protobuf", strings.NewReader(string(body)))
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		// memory_limiter refused: send again, as an SDK would.
		require.Contains(t, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, resp.StatusCode)
		time.Sleep(10 * time.Millisecond)
	}
}

// seqSeen counts each value of metric name in the accepted uploads.
func (r *run) seqSeen(name string) map[float64]int {
	out := map[float64]int{}
	for _, u := range r.srv.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			if m.Name == name {
				for _, dp := range m.Datapoints {
					out[dp.GetGauge()]++
				}
			}
		}
	}
	return out
}

// delivered waits until every value 0..total-1 of name reached Graphsignal
// and returns the duplicates.
func (r *run) delivered(t *testing.T, name string, total int, within time.Duration) int {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.seqSeen(name)) == total }, within, 200*time.Millisecond,
		"%s: %d of %d points delivered", name, len(r.seqSeen(name)), total)
	got := r.seqSeen(name)
	dups := 0
	for v := range total {
		require.GreaterOrEqual(t, got[float64(v)], 1, "%s point %d lost", name, v)
		dups += got[float64(v)] - 1
	}
	return dups
}

func (r *run) outage(t *testing.T) {
	down := max(r.duration/5, 10*time.Second)
	if r.duration >= 5*time.Minute {
		down = time.Minute
	}
	const per = 20
	r.srv.Close()
	t0 := time.Now()
	batches := 0
	for time.Since(t0) < down {
		r.postSeq(t, "soak.outage", batches, per)
		batches++
		time.Sleep(100 * time.Millisecond)
	}
	r.alive(t)
	require.NoError(t, r.srv.Restart())
	back := time.Now()
	dups := r.delivered(t, "soak.outage", batches*per, 5*time.Minute)
	r.addf("\n### Backend outage\n")
	r.addf("Fake Graphsignal down %s with the persistent queue; %d points accepted meanwhile, all %d delivered %.1f s after it came back, %d duplicates.",
		down.Round(time.Second), batches*per, batches*per, time.Since(back).Seconds(), dups)
}

func (r *run) crash(t *testing.T) {
	const per, batches, first = 20, 40, 10
	for b := range first {
		r.postSeq(t, "soak.crash", b, per)
	}
	var failed atomic.Int32
	r.srv.SetResponder(func(*graphsignaltest.Upload) (int, http.Header) {
		failed.Add(1)
		return http.StatusServiceUnavailable, nil
	})
	for b := first; b < batches; b++ {
		r.postSeq(t, "soak.crash", b, per)
	}
	require.Eventually(t, func() bool { return failed.Load() >= 2 }, time.Minute, 20*time.Millisecond)
	r.c.Kill()
	r.p.close()
	before := len(r.seqSeen("soak.crash"))
	r.srv.SetResponder(nil)
	r.start()
	dups := r.delivered(t, "soak.crash", batches*per, 3*time.Minute)
	r.addf("\n### Crash\n")
	r.addf("SIGKILL with the backend answering 503: %d of %d points delivered before the kill; after the restart on the same queue all %d delivered, %d duplicates (at least once).",
		before, batches*per, batches*per, dups)
}

// memory floods the OTLP receiver with 16 unpaced senders and checks the
// two layers that bound the collector's memory: memory_limiter refuses
// data (visibly: the sender, the receiver's and the limiter's counters all
// see each refusal, and nothing refused is lost), and GOMEMLIMIT keeps the
// Go runtime's memory at memory_limiter's limit, so that the peak RSS, which
// adds the binary's own pages, stays under the budget.
func (r *run) memory(t *testing.T) {
	spans := &spanSender{url: "http://" + r.ports.Addr("otlp_http") + "/v1/traces", batches: spanBatches(16, 4*spansPerRq), per: 4 * spansPerRq}
	before := r.telemetry(t)
	baseAccepted := before.sum("otelcol_receiver_accepted_spans", `receiver="otlp"`)
	baseRefused := before.sum("otelcol_receiver_refused_spans", `receiver="otlp"`)
	baseLimiter := before.sum("otelcol_processor_memory_limiter_refused_spans")
	baseCounted := r.requestsCounted()
	d := max(r.duration/3, 15*time.Second)
	require.NoError(t, r.p.resetPeak())
	r.p.resetSamples()
	// As fast as 16 senders go, for at least d and until memory_limiter has
	// refused data: on a loaded machine they take longer to push the heap to
	// the limit. Past 4d without a refusal, the assertion below fails.
	ctx, cancel := context.WithTimeout(t.Context(), 4*d)
	defer cancel()
	flood := make(chan error, 1)
	start := time.Now()
	go func() { flood <- spans.run(ctx, 0, 16) }()
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	var floodErr error
wait:
	for {
		select {
		case floodErr = <-flood:
			break wait
		case <-poll.C:
			if time.Since(start) >= d && r.telemetry(t).sum("otelcol_processor_memory_limiter_refused_spans") > baseLimiter {
				cancel()
			}
		}
	}
	require.NoError(t, floodErr)
	d = time.Since(start).Round(time.Second)
	r.alive(t)

	// Refused is not lost: every refused batch was sent again and accepted,
	// and every accepted span reached inference_metrics, whose flushes the
	// limiter may also refuse (it carries their interval to the next one).
	var s series
	require.Eventually(t, func() bool {
		s = r.telemetry(t)
		return s.sum("otelcol_receiver_accepted_spans", `receiver="otlp"`)-baseAccepted == float64(spans.accepted.Load()) &&
			r.requestsCounted()-baseCounted == float64(spans.accepted.Load())
	}, time.Minute, 200*time.Millisecond, "accepted spans %d", spans.accepted.Load())
	refused := s.sum("otelcol_receiver_refused_spans", `receiver="otlp"`) - baseRefused
	limiter := s.sum("otelcol_processor_memory_limiter_refused_spans") - baseLimiter
	assert.Equal(t, float64(spans.refused.Load()*int64(spans.per)), refused, "the limiter's refusals reach the sender and the receiver's counter alike")
	assert.Equal(t, refused, limiter, "otelcol_processor_memory_limiter_refused_spans counts each refusal")
	assert.Positive(t, limiter, "the flood reached memory_limiter's soft limit (%d MiB of heap) and it refused data", limitMiB-r.spikeMiB)

	peak, err := r.p.peakRSS() // the flood and the drain after it
	require.NoError(t, err)
	anon, file := r.p.atPeak()
	if r.gomemlimit == defaultGOMEMLIMIT {
		assert.Less(t, peak, float64(budgetMiB), "peak RSS (VmHWM) under the %d MiB budget with GOMEMLIMIT=%s", budgetMiB, r.gomemlimit)
	} else {
		t.Logf("SOAK_GOMEMLIMIT=%s: peak RSS %.0f MiB reported, not asserted", r.gomemlimit, peak)
	}
	r.addf("\n### Memory\n")
	r.addf("16 unpaced senders of %d-span batches for %s: %d spans accepted, %.0f refused by memory_limiter (sent again by the sender until accepted; all %d counted by inference_metrics).",
		spans.per, d, spans.accepted.Load(), limiter, spans.accepted.Load())
	r.addf("\nPeak RSS %.0f MiB (VmHWM, this phase) with GOMEMLIMIT=%s, memory_limiter limit_mib %d, budget %d MiB; at the highest sample %.0f MiB anonymous (the Go runtime's memory) and %.0f MiB file-backed (the binary's pages).",
		peak, r.gomemlimit, limitMiB, budgetMiB, anon, file)
	side := "over"
	if peak < limitMiB {
		side = "under"
	}
	r.addf(" Peak RSS %s memory_limiter's limit_mib.", side)
	r.dropReport(s)
}
