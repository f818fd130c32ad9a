// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver

import (
	"context"
	"encoding/binary"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadatatest"
)

// testRing is a hook's side of a ring, in Go, following
// integrations/python/inferprof_hook/ring.py: a sealed memfd, a pipe whose
// write end stays here, an announcement with both descriptors, and a wake
// datagram when the reader sleeps.
type testRing struct {
	id     uint64
	memfd  int
	pipe   [2]int
	mem    []byte
	w      *stepwire.RingWriter
	woken  uint64
	closed bool
}

func newTestRing(t testing.TB, id uint64, capacity int, seal bool) *testRing {
	t.Helper()
	flags := unix.MFD_CLOEXEC
	if seal {
		flags |= unix.MFD_ALLOW_SEALING
	}
	fd, err := unix.MemfdCreate("test-ring", flags)
	require.NoError(t, err)
	size := stepwire.RingHeaderBytes + capacity
	require.NoError(t, unix.Ftruncate(fd, int64(size)))
	if seal {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
		require.NoError(t, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	g := &testRing{id: id, memfd: fd, mem: mem, w: stepwire.NewRingWriter(mem, id, uint32(os.Getpid()))}
	require.NoError(t, unix.Pipe2(g.pipe[:], unix.O_CLOEXEC))
	t.Cleanup(g.close)
	return g
}

// exit closes what the hook's process holds, as its exit would.
func (g *testRing) close() {
	if g.closed {
		return
	}
	g.closed = true
	_ = unix.Munmap(g.mem)
	_ = unix.Close(g.memfd)
	_ = unix.Close(g.pipe[0])
	_ = unix.Close(g.pipe[1])
}

func controlDatagram(kind byte, id uint64) []byte {
	b := make([]byte, stepwire.ControlSize)
	copy(b, stepwire.RingMagic[:])
	b[4] = stepwire.RingVersion
	b[5] = kind
	binary.LittleEndian.PutUint64(b[8:], id)
	return b
}

// sendFDs sends b with descriptors fds to the receiver's socket.
func sendFDs(t *testing.T, path string, b []byte, fds ...int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	require.NoError(t, unix.Sendmsg(fd, b, oob, &unix.SockaddrUnix{Name: path}, 0))
}

func (g *testRing) announce(t *testing.T, path string) {
	sendFDs(t, path, controlDatagram(stepwire.ControlAnnounce, g.id), g.memfd, g.pipe[0])
}

// write writes one record and, as the hook does, sends one wake datagram
// per sleep of the reader.
func (g *testRing) write(t *testing.T, path string, rec []byte) {
	t.Helper()
	require.True(t, g.w.Write(rec), "ring full")
	if sleep := binary.LittleEndian.Uint64(g.mem[136:]); sleep&1 == 1 && sleep != g.woken {
		g.woken = sleep
		sendFDs(t, path, controlDatagram(stepwire.ControlWake, g.id))
	}
}

func stepRecord(pid uint32, index uint64) []byte {
	return stepwire.Encode(&stepwire.Step{
		Engine: stepwire.EngineVLLM, PID: pid, Index: index, StartUnixNs: int64(index) * 1000,
		EndUnixNs: int64(index)*1000 + 500, ServiceName: "svc", Host: "h", InstanceID: "inst-1",
		RequestIDs: []string{"r"}, RequestTokens: []int64{1},
	})
}

func stepIndexes(h *harness) []int64 {
	var out []int64
	for _, rs := range spans(h.sink.AllTraces()) {
		sp := rs.ScopeSpans().At(0).Spans().At(0)
		v, _ := sp.Attributes().Get(names.AttrStepIndex)
		out = append(out, v.Int())
	}
	return out
}

func TestRingRecordsBecomeSpans(t *testing.T) {
	h := start(t, socketDir(t)+"/s.sock", nil)
	g := newTestRing(t, 7, 1<<12, true)
	g.write(t, h.path, stepRecord(1, 1)) // written before the announcement: read too
	g.announce(t, h.path)
	for i := uint64(2); i <= 200; i++ {
		g.write(t, h.path, stepRecord(1, i))
		if i%20 == 0 { // the ring is small: let the receiver catch up
			require.Eventually(t, func() bool { return h.sink.SpanCount() == int(i) }, 5*time.Second, time.Millisecond)
		}
	}
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 200 }, 5*time.Second, time.Millisecond)
	want := make([]int64, 200)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, stepIndexes(h), "every record once, in order, across the ring's end")
	metadatatest.AssertEqualReceiverEngineStepRings(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	res := spans(h.sink.AllTraces())[0].Resource().Attributes()
	v, _ := res.Get(names.ResourceServiceInstance)
	assert.Equal(t, "inst-1", v.Str(), "the hook's service.instance.id")

	g.announce(t, h.path) // again, as after a second without a beat
	g.write(t, h.path, stepRecord(1, 201))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 201 }, 5*time.Second, time.Millisecond)
	metadatatest.AssertEqualReceiverEngineStepRings(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp()) // one ring, announced twice
	assert.Zero(t, h.counter(t, "receiver_engine_step_rings_refused"))
}

func TestRingOfAnExitedHookIsReadToTheEndAndReleased(t *testing.T) {
	block := make(chan struct{})
	sink := &blockingSink{block: block}
	h := start(t, socketDir(t)+"/s.sock", sink)
	g := newTestRing(t, 9, 1<<12, true)
	g.announce(t, h.path)
	g.write(t, h.path, stepRecord(2, 1))
	// The consumer holds the read loop on the first record while the hook
	// writes more and exits (a crash closes the same descriptors).
	require.Eventually(t, func() bool { return sink.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	for i := uint64(2); i <= 10; i++ {
		g.write(t, h.path, stepRecord(2, i))
	}
	g.close()
	close(block)
	require.Eventually(t, func() bool { return sink.spans.Load() == 10 }, 5*time.Second, time.Millisecond,
		"what the hook wrote before it exited is read")
	require.Eventually(t, func() bool { return h.counter(t, "receiver_engine_step_rings") == 0 }, 5*time.Second,
		10*time.Millisecond, "and the ring is let go")
}

func TestRestartedReceiverGoesOnWhereTheLastStopped(t *testing.T) {
	dir := socketDir(t)
	h1 := start(t, dir+"/s.sock", nil)
	g := newTestRing(t, 3, 1<<12, true)
	g.announce(t, h1.path)
	for i := uint64(1); i <= 5; i++ {
		g.write(t, h1.path, stepRecord(3, i))
	}
	require.Eventually(t, func() bool { return h1.sink.SpanCount() == 5 }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.rcv.Shutdown(t.Context()))
	for i := uint64(6); i <= 9; i++ { // nobody reads these yet
		require.True(t, g.w.Write(stepRecord(3, i)))
	}
	h2 := start(t, dir+"/s.sock", nil)
	g.announce(t, h2.path) // the hook's beat check
	require.Eventually(t, func() bool { return h2.sink.SpanCount() == 4 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []int64{6, 7, 8, 9}, stepIndexes(h2), "nothing twice, nothing lost")
}

func TestIdleReceiverSleepsAndARingWakesIt(t *testing.T) {
	h := start(t, socketDir(t)+"/s.sock", nil)
	g := newTestRing(t, 5, 1<<12, true)
	g.announce(t, h.path)
	g.write(t, h.path, stepRecord(4, 1))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, h.rcv.waiting.Load, 5*time.Second, time.Millisecond, "an idle receiver waits")
	sleep := binary.LittleEndian.Uint64(g.mem[136:])
	assert.Equal(t, uint64(1), sleep&1, "and marked the ring sleeping")
	g.write(t, h.path, stepRecord(4, 2)) // sends the wake datagram
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 2 }, 800*time.Millisecond, time.Millisecond,
		"woken at once, not after the ring sleep bound (1s)")
	assert.Equal(t, sleep, g.woken, "one wake per sleep")
}

func TestRingsThatCannotBeTrustedAreRefused(t *testing.T) {
	h := start(t, socketDir(t)+"/s.sock", nil)
	unsealed := newTestRing(t, 1, 1<<12, false)
	unsealed.announce(t, h.path)
	g := newTestRing(t, 2, 1<<12, true)
	sendFDs(t, h.path, controlDatagram(stepwire.ControlAnnounce, 2), g.memfd)             // no pipe
	sendFDs(t, h.path, controlDatagram(stepwire.ControlAnnounce, 2), g.memfd, g.memfd)    // not a pipe
	sendFDs(t, h.path, controlDatagram(stepwire.ControlAnnounce, 99), g.memfd, g.pipe[0]) // wrong id
	f, err := os.CreateTemp(t.TempDir(), "plain")
	require.NoError(t, err)
	defer f.Close()
	sendFDs(t, h.path, controlDatagram(stepwire.ControlAnnounce, 2), int(f.Fd()), g.pipe[0]) // a regular file
	require.Eventually(t, func() bool { return h.counter(t, "receiver_engine_step_rings_refused") == 5 },
		5*time.Second, time.Millisecond)
	assert.Zero(t, h.counter(t, "receiver_engine_step_rings"))
	// A step datagram with descriptors attached is read; they are closed.
	sendFDs(t, h.path, stepRecord(1, 1), g.memfd)
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 1 }, 5*time.Second, time.Millisecond)
	g.announce(t, h.path)
	g.write(t, h.path, stepRecord(1, 2))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 2 }, 5*time.Second, time.Millisecond,
		"a sound ring is still taken")
}

func TestRingFaultIsCountedAndSkipped(t *testing.T) {
	h := start(t, socketDir(t)+"/s.sock", nil)
	g := newTestRing(t, 6, 1<<12, true)
	g.announce(t, h.path)
	g.write(t, h.path, stepRecord(6, 1))
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 1 }, 5*time.Second, time.Millisecond)
	// A buggy writer publishes an index past its capacity.
	binary.LittleEndian.PutUint64(g.mem[64:], 1<<40)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_engine_step_ring_faults") == 1 },
		5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return binary.LittleEndian.Uint64(g.mem[128:]) == 1<<40 },
		5*time.Second, time.Millisecond, "the reader skipped to the writer's position")
	assert.Equal(t, 1, h.sink.SpanCount())
	metadatatest.AssertEqualReceiverEngineStepRings(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp()) // the ring stays attached
}

// blockingSink holds the first ConsumeTraces call until block is closed.
type blockingSink struct {
	block chan struct{}
	calls atomic.Int64
	spans atomic.Int64
}

func (s *blockingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *blockingSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	s.calls.Add(1)
	<-s.block
	s.spans.Add(int64(td.SpanCount()))
	return nil
}
