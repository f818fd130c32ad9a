// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
)

func benchStep(n int) *stepwire.Step {
	s := &stepwire.Step{
		Engine: stepwire.EngineVLLM, Flags: stepwire.FlagKVUsage, PID: 4242, Index: 1,
		StartUnixNs: 1_700_000_000_000_000_000, EndUnixNs: 1_700_000_000_020_000_000,
		DecodeRequests: uint32(n), ScheduledTokens: uint32(n), Running: uint32(n), KVUsage: 0.4,
		ServiceName: "vllm-llama", EngineVersion: "0.11.0", Host: "gpu-node-1",
	}
	for i := range n {
		s.RequestIDs = append(s.RequestIDs, "chatcmpl-"+strings.Repeat("0", 24)+strconv.Itoa(100000+i))
		s.RequestTokens = append(s.RequestTokens, 1)
	}
	return s
}

// BenchmarkHandle measures one step datagram from bytes to an engine.step
// span handed to the next consumer (impl=ours), against unmarshalling the
// same span from OTLP protobuf, what the hook would cost the collector if it
// sent OTLP instead (impl=baseline).
func BenchmarkHandle(b *testing.B) {
	for _, n := range []int{1, 32, 256} {
		s := benchStep(n)
		buf := stepwire.Encode(s)
		b.Run("impl=ours/requests="+strconv.Itoa(n), func(b *testing.B) {
			r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), &Config{Endpoint: "/unused"}, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				r.handle(ctx, buf)
			}
		})
		otlp, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(newConverter("bench").traces(s))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("impl=baseline/requests="+strconv.Itoa(n), func(b *testing.B) {
			// The same receiver bookkeeping (obsreport) as ours.
			r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), &Config{Endpoint: "/unused"}, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			u := &ptrace.ProtoUnmarshaler{}
			b.ReportAllocs()
			b.SetBytes(int64(len(otlp)))
			for b.Loop() {
				td, err := u.UnmarshalTraces(otlp)
				if err != nil {
					b.Fatal(err)
				}
				obsCtx := r.obs.StartTracesOp(ctx)
				err = r.next.ConsumeTraces(obsCtx, td)
				r.obs.EndTracesOp(obsCtx, "engine_step", 1, err)
			}
		})
	}
}

// BenchmarkReceive measures what the collector spends to get one step
// record into memory, before decoding: read from a hook's ring (impl=ring:
// framing, bounds checks, the copy out, the shared index stores) against
// one recvmsg(2) of the same bytes as a datagram (impl=datagram, the
// fallback). Both run on one goroutine: the writer's side is in the loop too
// (the ring write, or the send), so the ratio is of the whole hand-over.
func BenchmarkReceive(b *testing.B) {
	for _, n := range []int{1, 256} {
		rec := stepwire.Encode(benchStep(n))
		buf := make([]byte, stepwire.MaxDatagram+1)
		b.Run("impl=ring/requests="+strconv.Itoa(n), func(b *testing.B) {
			g := newTestRing(b, 1, 1<<22, true)
			rs := newRings()
			if _, err := rs.attach(1, dupFDs(b, g.memfd, g.pipe[0])); err != nil {
				b.Fatal(err)
			}
			defer rs.closeAll()
			ring := rs.byID[1].r
			ring.SetLag(false)
			got := 0
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if !g.w.Write(rec) {
					b.Fatal("ring full")
				}
				if _, err := ring.Read(buf, false, func(r []byte) { got += len(r) }); err != nil {
					b.Fatal(err)
				}
			}
			if got != b.N*len(rec) {
				b.Fatalf("read %d bytes, want %d", got, b.N*len(rec))
			}
		})
		b.Run("impl=datagram/requests="+strconv.Itoa(n), func(b *testing.B) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			oob := make([]byte, unix.CmsgSpace(4*maxFDs))
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if err := unix.Send(fds[0], rec, 0); err != nil {
					b.Fatal(err)
				}
				if got, _, err := recvmsg(fds[1], buf, oob); err != nil || got != len(rec) {
					b.Fatalf("recvmsg: %d bytes, %v", got, err)
				}
			}
		})
	}
}

// dupFDs duplicates fds, as SCM_RIGHTS hands the receiver its own.
func dupFDs(tb testing.TB, fds ...int) []int {
	tb.Helper()
	out := make([]int, len(fds))
	for i, fd := range fds {
		d, err := unix.Dup(fd)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = d
	}
	return out
}
