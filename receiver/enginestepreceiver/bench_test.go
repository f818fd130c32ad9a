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
