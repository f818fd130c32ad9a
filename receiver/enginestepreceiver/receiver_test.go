// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/extension/stepstoreextension/stepstoretest"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepspan"
	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/internal/telemetrytest"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadatatest"
)

const fixtures = "../../internal/stepwire/testdata"

// socketDir returns a short private folder: t.TempDir paths can pass the
// 107-byte socket path limit.
func socketDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "es")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

type harness struct {
	path string
	rcv  *engineStepReceiver
	sink *consumertest.TracesSink
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
	win  *gpuwindow.Window // the step_store the receiver references
}

func start(t *testing.T, path string, next consumer.Traces) *harness {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, logs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = path
	cfg.StepStore = stepstoretest.Ref()
	host, win := stepstoretest.NewHost(t)
	h := &harness{path: path, tel: tel, logs: logs, win: win}
	if next == nil {
		h.sink = new(consumertest.TracesSink)
		next = h.sink
	}
	r, err := newReceiver(set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
	h.rcv = r
	return h
}

func (h *harness) send(t *testing.T, datagrams ...[]byte) {
	t.Helper()
	c, err := net.Dial("unixgram", h.path)
	require.NoError(t, err)
	defer c.Close()
	for _, d := range datagrams {
		_, err := c.Write(d)
		require.NoError(t, err)
	}
}

// counter reads one of the receiver's own counters, declared in
// metadata.yaml (a misspelt name fails); the exact checks use metadatatest.
func (h *harness) counter(t *testing.T, name string) int64 {
	t.Helper()
	return telemetrytest.NewCounters(t, h.tel, "metadata.yaml").Sum(t, name)
}

// unstarted returns a receiver to call handle on directly, and a reader of
// its counters.
func unstarted(t *testing.T) (*engineStepReceiver, func(name string) int64) {
	t.Helper()
	h := &harness{tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	r, err := newReceiver(set, &Config{Endpoint: "/unused"}, consumertest.NewNop())
	require.NoError(t, err)
	return r, func(name string) int64 { return h.counter(t, name) }
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	require.NoError(t, err)
	return b
}

func spans(td []ptrace.Traces) []ptrace.ResourceSpans {
	var out []ptrace.ResourceSpans
	for _, t := range td {
		for i := range t.ResourceSpans().Len() {
			out = append(out, t.ResourceSpans().At(i))
		}
	}
	return out
}

func strSlice(v pcommon.Value) []string {
	out := []string{}
	for i := range v.Slice().Len() {
		out = append(out, v.Slice().At(i).Str())
	}
	return out
}

func intSlice(v pcommon.Value) []int64 {
	out := []int64{}
	for i := range v.Slice().Len() {
		out = append(out, v.Slice().At(i).Int())
	}
	return out
}

func TestPythonDatagramsBecomeEngineStepSpans(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	// Version 1 datagrams, as a hook older than the collector sends them.
	spec := readFixture(t, "v1/vllm_spec.bin")
	pre := readFixture(t, "v1/vllm_preempt.bin")
	h.send(t, spec, pre)
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond)

	var want stepwire.Step
	require.NoError(t, stepwire.Decode(spec, &want))
	rs := spans(h.sink.AllTraces())[0]
	res := rs.Resource().Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		names.ResourceServiceName:     "fixture-svc",
		names.ResourceEngineName:      "vllm",
		names.ResourceEngineVersion:   want.EngineVersion,
		names.ResourceProcessPID:      int64(want.PID),
		names.ResourceHostName:        want.Host,
		names.ResourceEngineIndex:     int64(1),
		names.ResourceServiceInstance: want.Host + "/" + strconv.FormatUint(uint64(want.PID), 10) + "/1",
	}, res)
	sp := rs.ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, names.SpanEngineStep, sp.Name())
	assert.Equal(t, ptrace.SpanKindInternal, sp.Kind())
	assert.Equal(t, want.StartUnixNs, int64(sp.StartTimestamp()))
	assert.Equal(t, want.EndUnixNs, int64(sp.EndTimestamp()))
	assert.False(t, sp.TraceID().IsEmpty())
	assert.False(t, sp.SpanID().IsEmpty())
	a := sp.Attributes()
	get := func(k string) pcommon.Value {
		v, ok := a.Get(k)
		require.True(t, ok, k)
		return v
	}
	assert.Equal(t, int64(3), get(names.AttrStepIndex).Int())
	assert.Equal(t, int64(want.PrefillRequests), get(names.AttrStepPrefillReqs).Int())
	assert.Equal(t, int64(want.DecodeRequests), get(names.AttrStepDecodeReqs).Int())
	assert.Equal(t, int64(want.ScheduledTokens), get(names.AttrStepScheduledToks).Int())
	assert.Equal(t, int64(want.Running), get(names.AttrStepRunningReqs).Int())
	assert.Equal(t, int64(want.Waiting), get(names.AttrStepWaitingReqs).Int())
	assert.InDelta(t, float64(want.KVUsage), get(names.AttrStepKVCacheUsage).Double(), 1e-9)
	assert.Equal(t, pcommon.ValueTypeSlice, get(names.AttrStepRequestIDs).Type())
	assert.Equal(t, []string{"chatcmpl-a", "chatcmpl-ü", "chatcmpl-b"}, strSlice(get(names.AttrStepRequestIDs)))
	assert.Equal(t, []int64{1, 3, 1}, intSlice(get(names.AttrStepRequestTokens)))
	assert.Empty(t, strSlice(get(names.AttrStepPreempted)))
	assert.Empty(t, strSlice(get(names.AttrStepResumed)))
	_, truncated := a.Get(names.AttrStepIDsTruncated)
	assert.False(t, truncated)
	_, degraded := a.Get(names.AttrStepDegraded)
	assert.False(t, degraded)

	sp2 := spans(h.sink.AllTraces())[1].ScopeSpans().At(0).Spans().At(0)
	v, _ := sp2.Attributes().Get(names.AttrStepPreempted)
	assert.Equal(t, []string{"chatcmpl-b"}, strSlice(v))
	assert.NotEqual(t, sp.TraceID(), sp2.TraceID(), "one trace per step")
	metadatatest.AssertEqualReceiverEngineStepSteps(t, h.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

func TestVersion2CarriesResumedAndDegraded(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	resumed := readFixture(t, "vllm_resumed.bin")
	degraded := readFixture(t, "sglang_degraded.bin")
	h.send(t, resumed, degraded)
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond)
	var want stepwire.Step
	require.NoError(t, stepwire.Decode(resumed, &want))
	require.NotEmpty(t, want.Resumed)
	all := spans(h.sink.AllTraces())
	a := all[0].ScopeSpans().At(0).Spans().At(0).Attributes()
	v, ok := a.Get(names.AttrStepResumed)
	require.True(t, ok)
	assert.Equal(t, want.Resumed, strSlice(v))
	_, ok = a.Get(names.AttrStepDegraded)
	assert.False(t, ok, "set only when true")
	a = all[1].ScopeSpans().At(0).Spans().At(0).Attributes()
	v, ok = a.Get(names.AttrStepDegraded)
	require.True(t, ok)
	assert.True(t, v.Bool())
	metadatatest.AssertEqualReceiverEngineStepDegradedSteps(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

// Version 4: the step's batch number and launch windows become span
// attributes; executor workers' launch marks go to the correlation window.
func TestLaunchWindowsAndMarks(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	step := readFixture(t, "vllm_async_prefill.bin")
	var want stepwire.Step
	require.NoError(t, stepwire.Decode(step, &want))
	require.NotEmpty(t, want.Windows)
	win := h.win
	before := win.Stats().Marks
	h.send(t, step, readFixture(t, "marks/hello.bin"), readFixture(t, "marks/batch.bin"))
	require.Eventually(t, func() bool {
		return h.sink.SpanCount() == 1 && h.counter(t, "receiver_engine_step_launch_marks") == 2
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, before+2, win.Stats().Marks, "the marks reached the step store")
	assert.Zero(t, h.counter(t, "receiver_engine_step_bad_datagrams"))
	a := spans(h.sink.AllTraces())[0].ScopeSpans().At(0).Spans().At(0).Attributes()
	get := func(k string) pcommon.Value {
		v, ok := a.Get(k)
		require.True(t, ok, k)
		return v
	}
	assert.Equal(t, int64(want.Batch), get(names.AttrStepBatch).Int())
	var starts, ends, threads []int64
	for _, w := range want.Windows {
		starts, ends, threads = append(starts, w.StartUnixNs), append(ends, w.EndUnixNs), append(threads, int64(w.ThreadID))
	}
	assert.Equal(t, starts, intSlice(get(names.AttrStepLaunchStarts)))
	assert.Equal(t, ends, intSlice(get(names.AttrStepLaunchEnds)))
	assert.Equal(t, threads, intSlice(get(names.AttrStepLaunchThreads)))
	// The processor reads them back as the window's step info.
	var st stepspan.Step
	require.True(t, stepspan.Read(spans(h.sink.AllTraces())[0].ScopeSpans().At(0).Spans().At(0), &st, stepspan.Launch))
	require.Zero(t, st.Bad)
	var si gpuwindow.StepInfo
	si.FromStep(&st)
	assert.Equal(t, want.Batch, si.Batch)
	require.Len(t, si.Windows, len(want.Windows))
	assert.Equal(t, want.Windows[0].StartUnixNs, si.Windows[0].Start)

	// An older step has neither.
	h.send(t, readFixture(t, "v3/vllm_spec.bin"))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond)
	a = spans(h.sink.AllTraces())[1].ScopeSpans().At(0).Spans().At(0).Attributes()
	_, ok := a.Get(names.AttrStepBatch)
	assert.False(t, ok)
	_, ok = a.Get(names.AttrStepLaunchStarts)
	assert.False(t, ok)

	// A bad mark is counted and dropped, like a bad step.
	bad := readFixture(t, "marks/batch.bin")
	h.send(t, bad[:20])
	require.Eventually(t, func() bool { return h.counter(t, "receiver_engine_step_bad_datagrams") == 1 },
		5*time.Second, 5*time.Millisecond)
}

func TestBadDatagramsAreCountedLoggedAtARateAndNeverFatal(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	good := readFixture(t, "sglang_prefill.bin")
	trailing := append(append([]byte(nil), good...), 0)
	h.send(t, []byte("garbage"), good[:40], trailing, good, []byte{}, good)
	require.Eventually(t, func() bool {
		return h.sink.SpanCount() == 2 && h.counter(t, "receiver_engine_step_bad_datagrams") == 4
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, h.logs.FilterMessage("dropped a bad engine step datagram").Len(),
		"bad datagrams within the interval share one warning")
	rs := spans(h.sink.AllTraces())[0]
	svc, _ := rs.Resource().Attributes().Get(names.ResourceServiceName)
	assert.Equal(t, "fixture-svc", svc.Str())
}

func withDropped(t *testing.T, b []byte, pid, dropped uint32) []byte {
	t.Helper()
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[8:], pid)
	binary.LittleEndian.PutUint32(c[64:], dropped)
	return c
}

func TestHookDropsAreCountedAsDeltas(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	b := readFixture(t, "vllm_async_prefill.bin")
	h.send(t,
		withDropped(t, b, 10, 5), // 5 dropped before the collector came up
		withDropped(t, b, 10, 5),
		withDropped(t, b, 10, 8), // +3
		withDropped(t, b, 11, 2), // another process: +2
		withDropped(t, b, 10, 1), // restarted count: +1
	)
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 5 }, 5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverEngineStepHookDropped(t, h.tel, []metricdata.DataPoint[int64]{{Value: 11}}, metricdatatest.IgnoreTimestamp())
}

func TestHookEvictedIDsAreCountedAsDeltas(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	b := readFixture(t, "vllm_async_prefill.bin")
	evicted := func(pid, n uint32) []byte {
		c := withDropped(t, b, pid, 0)
		binary.LittleEndian.PutUint32(c[68:], n) // version 2: hook_evicted_ids
		return c
	}
	h.send(t, evicted(10, 3), evicted(10, 7), evicted(11, 1))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 3 }, 5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverEngineStepHookEvictedIds(t, h.tel, []metricdata.DataPoint[int64]{{Value: 8}}, metricdatatest.IgnoreTimestamp())
}

// TestSourcesAreBoundedAndCounted: past maxSources hook processes the one
// heard least recently is forgotten and counted; a live one is kept.
func TestSourcesAreBoundedAndCounted(t *testing.T) {
	r, count := unstarted(t)
	b := readFixture(t, "vllm_async_prefill.bin")
	var fx stepwire.Step
	require.NoError(t, stepwire.Decode(b, &fx))
	key := func(pid uint32) sourceKey { return sourceKey{host: fx.Host, pid: pid, index: fx.EngineIndex} }
	ctx := context.Background()
	r.handle(ctx, withDropped(t, b, 1, 0)) // pid 1, heard first, and again below
	for pid := uint32(2); pid <= maxSources+10; pid++ {
		r.handle(ctx, withDropped(t, b, pid, 0))
		if pid == 100 {
			r.handle(ctx, withDropped(t, b, 1, 0))
		}
	}
	assert.Len(t, r.sources, maxSources)
	assert.Contains(t, r.sources, key(1), "recently heard: kept")
	assert.NotContains(t, r.sources, key(2), "least recently heard: forgotten")
	assert.Equal(t, int64(10), count("receiver_engine_step_sources_evicted"))
}

func TestIDTableResetsAreCounted(t *testing.T) {
	r, count := unstarted(t)
	s := stepwire.Step{Engine: stepwire.EngineVLLM, Index: 1, RequestTokens: []int64{1}}
	for i := range 1<<16 + 1 {
		s.RequestIDs = []string{strconv.Itoa(i)}
		r.handle(context.Background(), stepwire.Encode(&s))
	}
	assert.Equal(t, int64(1), count("receiver_engine_step_id_table_resets"))
}

func TestTruncatedStepsAreMarkedAndCounted(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	b := append([]byte(nil), readFixture(t, "vllm_async_prefill.bin")...)
	b[6] |= byte(stepwire.FlagIDsTruncated)
	h.send(t, b)
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 1 }, 5*time.Second, 5*time.Millisecond)
	sp := spans(h.sink.AllTraces())[0].ScopeSpans().At(0).Spans().At(0)
	v, ok := sp.Attributes().Get(names.AttrStepIDsTruncated)
	require.True(t, ok)
	assert.True(t, v.Bool())
	metadatatest.AssertEqualReceiverEngineStepTruncatedSteps(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestRefusedStepsDoNotStopTheReceiver(t *testing.T) {
	sink := new(consumertest.TracesSink)
	fail := true
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if fail {
			fail = false
			return errors.New("memory limiter refused")
		}
		return sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	h := start(t, filepath.Join(socketDir(t), "s.sock"), next)
	b := readFixture(t, "vllm_async_prefill.bin")
	h.send(t, b, b)
	require.Eventually(t, func() bool { return sink.SpanCount() == 1 }, 5*time.Second, 5*time.Millisecond)
	m, err := h.tel.GetMetric("otelcol_receiver_refused_spans")
	require.NoError(t, err)
	assert.Equal(t, int64(1), m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
}

func TestSocketIsPrivate(t *testing.T) {
	dir := filepath.Join(socketDir(t), "sub")
	h := start(t, filepath.Join(dir, "s.sock"), nil)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	fi, err = os.Stat(h.path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.NotZero(t, fi.Mode()&os.ModeSocket)
}

func TestStaleSocketIsReplacedLiveOneRefused(t *testing.T) {
	path := filepath.Join(socketDir(t), "s.sock")
	stale, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	// A live socket: Start must refuse it.
	set := receivertest.NewNopSettings(metadata.Type)
	cfg := &Config{Endpoint: path, PollInterval: time.Millisecond}
	r, err := newReceiver(set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.ErrorContains(t, r.Start(context.Background(), componenttest.NewNopHost()), "another process is serving it")
	require.NoError(t, r.Shutdown(context.Background()))
	require.NoError(t, stale.Close()) // the file stays, as after a crash
	_, err = os.Stat(path)
	require.NoError(t, err)

	h := start(t, path, nil)
	h.send(t, readFixture(t, "vllm_async_prefill.bin"))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestNotASocketIsAnError(t *testing.T) {
	path := filepath.Join(socketDir(t), "file")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), &Config{Endpoint: path, PollInterval: time.Millisecond}, consumertest.NewNop())
	require.NoError(t, err)
	require.ErrorContains(t, r.Start(context.Background(), componenttest.NewNopHost()), "is not a socket")
}

func TestShutdownRemovesSocketAndIsIdempotent(t *testing.T) {
	path := filepath.Join(socketDir(t), "s.sock")
	r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), &Config{Endpoint: path, PollInterval: time.Millisecond}, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(context.Background()), "safe without Start")
	r, err = newReceiver(receivertest.NewNopSettings(metadata.Type), &Config{Endpoint: path, PollInterval: time.Millisecond}, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
	require.NoError(t, r.Shutdown(context.Background()))
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestIDsAreStablePerInstanceAndStep(t *testing.T) {
	s := stepwire.Step{Host: "h", PID: 1, Index: 7}
	t1, s1 := ids(&s)
	t2, s2 := ids(&s)
	assert.Equal(t, t1, t2)
	assert.Equal(t, s1, s2)
	seen := map[pcommon.SpanID]bool{}
	for i := uint64(1); i <= 1000; i++ {
		s.Index = i
		_, sid := ids(&s)
		assert.False(t, sid.IsEmpty())
		seen[sid] = true
	}
	assert.Len(t, seen, 1000)
}

// FuzzHandle feeds arbitrary datagrams through decode and span building.
func FuzzHandle(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.bin"))
	old, _ := filepath.Glob(filepath.Join(fixtures, "v*", "*.bin"))
	marks, _ := filepath.Glob(filepath.Join(fixtures, "marks", "*.bin"))
	files = append(append(files, old...), marks...)
	sort.Strings(files)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	set := receivertest.NewNopSettings(metadata.Type)
	f.Fuzz(func(t *testing.T, b []byte) {
		sink := new(consumertest.TracesSink)
		r, err := newReceiver(set, &Config{Endpoint: "/unused"}, sink)
		require.NoError(t, err)
		r.handle(context.Background(), b)
		if sink.SpanCount() == 1 {
			sp := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			ids, _ := sp.Attributes().Get(names.AttrStepRequestIDs)
			toks, _ := sp.Attributes().Get(names.AttrStepRequestTokens)
			require.Equal(t, ids.Slice().Len(), toks.Slice().Len())
			// What we emit must marshal to OTLP, or exporters would fail.
			_, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(sink.AllTraces()[0])
			require.NoError(t, err)
		}
	})
}

// TestIdleReceiverWaitsAndWakes: after waitAfterIdle without datagrams the
// read loop waits on the socket; the next datagram wakes it, and so does
// Shutdown.
func TestIdleReceiverWaitsAndWakes(t *testing.T) {
	h := start(t, filepath.Join(socketDir(t), "s.sock"), nil)
	waiting := func() bool { return h.rcv.waiting.Load() }
	require.Eventually(t, waiting, 5*time.Second, time.Millisecond, "idle loop never waited on the socket")

	h.send(t, readFixture(t, "vllm_async_prefill.bin"))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, waiting, 5*time.Second, time.Millisecond, "loop did not go back to waiting")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.rcv.Shutdown(ctx), "Shutdown must wake a waiting loop")
}

// A step_store reference to a missing or wrong-typed extension fails Start
// with an error that names the key and the id, before the socket is bound.
func TestStepStoreReferenceErrors(t *testing.T) {
	host, _ := stepstoretest.NewHost(t)
	other := component.MustNewID("nop")
	nop, err := extensiontest.NewNopFactory().Create(context.Background(), extensiontest.NewNopSettings(other.Type()), nil)
	require.NoError(t, err)
	host[other] = nop
	for _, tc := range []struct {
		id   component.ID
		want string
	}{
		{component.MustNewIDWithName("step_store", "missing"), `step_store: extension "step_store/missing" not found`},
		{other, `step_store: extension "nop" is not a step_store extension`},
	} {
		cfg := createDefaultConfig().(*Config)
		cfg.Endpoint = filepath.Join(socketDir(t), "s.sock")
		cfg.StepStore = &tc.id
		r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), cfg, new(consumertest.TracesSink))
		require.NoError(t, err)
		require.ErrorContains(t, r.Start(context.Background(), host), tc.want)
		require.NoError(t, r.Shutdown(context.Background()))
		_, err = os.Stat(cfg.Endpoint)
		require.ErrorIs(t, err, os.ErrNotExist, "no socket was bound")
	}
}
