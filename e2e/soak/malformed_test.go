// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/stepwire"
)

// kinetoFixture is a real PyTorch profiler trace
// (receiver/cuptireceiver/testdata/kineto, from HTA's test data; see its
// README there).
const kinetoFixture = "triton_example-triton_example.json.gz"

// malformed sends bad input to every listener while good input flows, and
// checks that the collector stays up, counts and logs each bad input, and
// loses none of the good.
func (r *run) malformed(t *testing.T) {
	before := r.telemetry(t)
	spans := &spanSender{url: "http://" + r.ports.Addr("otlp_http") + "/v1/traces", batches: spanBatches(4, spansPerRq), per: spansPerRq}
	baseSpans := before.sum("otelcol_receiver_accepted_spans", `receiver="otlp"`)
	baseRequests := r.requestsCounted()
	baseSteps := before.sum("otelcol_receiver_engine_step_steps")
	baseRecords := before.sum("otelcol_receiver_cupti_records")

	// Good traffic, around the bad.
	good := func() {
		for range 2 {
			require.NoError(t, spans.post(t.Context(), http.DefaultClient, spans.batches[0]))
		}
	}
	good()

	// OTLP/HTTP: garbage, a truncated request, one over max_request_body_size (20 MiB).
	valid := spans.batches[1]
	otlp := "http://" + r.ports.Addr("otlp_http") + "/v1/traces"
	for name, body := range map[string][]byte{
		"garbage":   bytes.Repeat([]byte{0xff, 0x01}, 512),
		"truncated": valid[:len(valid)/2],
		"oversized": bytes.Repeat([]byte{0x0a}, 21<<20),
	} {
		resp, err := http.Post(otlp, "application/x-protobuf", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			assert.GreaterOrEqualf(t, resp.StatusCode, 400, "OTLP/HTTP %s accepted", name)
			assert.Lessf(t, resp.StatusCode, 500, "OTLP/HTTP %s: a client error, not a server one", name)
		}
	}
	// OTLP/gRPC: a request over the 4 MiB default max_recv_msg_size.
	conn, err := grpc.NewClient(r.ports.Addr("otlp_grpc"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	require.NoError(t, err)
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().Attributes().PutStr("big", strings.Repeat("x", 5<<20))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	cancel()
	assert.ErrorContains(t, err, "ResourceExhausted", "oversized gRPC request")
	require.NoError(t, conn.Close())

	// Engine step socket: garbage, a truncated datagram, an oversized one.
	stepSock := filepath.Join(r.sockDir, "step.sock")
	sc, err := net.Dial("unixgram", stepSock)
	require.NoError(t, err)
	okStep := stepwire.Encode(&stepwire.Step{Engine: stepwire.EngineVLLM, PID: 7, Index: 1, StartUnixNs: 1, EndUnixNs: 2, ServiceName: "vllm-bad"})
	badSteps := 0
	for _, dg := range [][]byte{[]byte("not a step datagram at all"), okStep[:len(okStep)-3]} {
		_, err := sc.Write(dg)
		require.NoError(t, err)
		badSteps++
	}
	if _, err := sc.Write(bytes.Repeat([]byte{'I'}, stepwire.MaxDatagram+1024)); err == nil {
		badSteps++ // the kernel took it; the receiver must refuse it
	} else {
		r.addf("\nAn oversized step datagram (%d bytes) is refused by the kernel at the sender (%v).", stepwire.MaxDatagram+1024, err)
	}
	for i := range 100 {
		_, err := sc.Write(stepwire.Encode(&stepwire.Step{Engine: stepwire.EngineVLLM, PID: 8, Index: uint64(i + 1), StartUnixNs: 1, EndUnixNs: 2, ServiceName: "vllm-good"}))
		require.NoError(t, err)
	}
	require.NoError(t, sc.Close())

	// A step ring whose writer then publishes an impossible write index:
	// the receiver counts a fault and skips to it; the record before it,
	// once read, arrived.
	bad, err := openStepRing(stepSock, 0xbad, 1<<16)
	require.NoError(t, err)
	defer bad.close()
	require.NoError(t, bad.announce())
	ok, err := bad.write(stepwire.Encode(&stepwire.Step{Engine: stepwire.EngineVLLM, PID: 9, Index: 1, StartUnixNs: 1, EndUnixNs: 2, ServiceName: "vllm-ring"}))
	require.NoError(t, err)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		return r.telemetry(t).sum("otelcol_receiver_engine_step_steps")-baseSteps == 101
	}, time.Minute, 50*time.Millisecond, "the ring's good record")
	binary.LittleEndian.PutUint64(bad.mem[64:], 1<<40) // the write word (docs/step-wire.md, Layout)

	// CUPTI socket: bad magic, a truncated frame, an absurd frame length.
	cuptiSock := filepath.Join(r.sockDir, "cupti.sock")
	hello := cuptiwire.AppendHello(nil, 4242, uint64(time.Now().UnixNano()), "bad")
	absurd := cuptiwire.AppendHeader(nil, cuptiwire.FrameTypeRecords, 0)
	binary.LittleEndian.PutUint32(absurd[8:], 1<<30)
	truncated := cuptiwire.AppendHeader(nil, cuptiwire.FrameTypeRecords, 10*cuptiwire.RecordSize)
	truncated = append(truncated, make([]byte, 20)...)
	for _, b := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), append(append([]byte(nil), hello...), truncated...), append(append([]byte(nil), hello...), absurd...)} {
		c, err := net.Dial("unix", cuptiSock)
		require.NoError(t, err)
		_, err = c.Write(b)
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	good()
	cc := &cuptiClients{sock: cuptiSock}
	cctx, ccancel := context.WithTimeout(t.Context(), 2*time.Second)
	require.NoError(t, cc.run(cctx, 1, 100_000))
	ccancel()

	// Kineto: a truncated trace, an oversized junk file, and a real one.
	fixture, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "receiver", "cuptireceiver", "testdata", "kineto", kinetoFixture))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(r.kineto, "truncated.json.gz"), fixture[:len(fixture)/2], 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(r.kineto, "oversized.json"), append([]byte(`{"traceEvents": [`), bytes.Repeat([]byte(`{"ph": "X", `), 1<<20)...), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(r.kineto, kinetoFixture), fixture, 0o600))

	var s series
	require.Eventually(t, func() bool {
		s = r.telemetry(t)
		return s.sum("otelcol_receiver_cupti_bad_trace_files")-before.sum("otelcol_receiver_cupti_bad_trace_files") == 2 &&
			s.sum("otelcol_receiver_cupti_trace_files")-before.sum("otelcol_receiver_cupti_trace_files") >= 1 &&
			s.sum("otelcol_receiver_engine_step_steps")-baseSteps == 101 &&
			s.sum("otelcol_receiver_engine_step_ring_faults")-before.sum("otelcol_receiver_engine_step_ring_faults") == 1 &&
			s.sum("otelcol_receiver_accepted_spans", `receiver="otlp"`)-baseSpans == float64(spans.accepted.Load()) &&
			r.requestsCounted()-baseRequests == float64(spans.accepted.Load())
	}, 2*time.Minute, 500*time.Millisecond)
	r.alive(t)
	assert.Equal(t, float64(badSteps), s.sum("otelcol_receiver_engine_step_bad_datagrams")-before.sum("otelcol_receiver_engine_step_bad_datagrams"))
	assert.Equal(t, 3.0, s.sum("otelcol_receiver_cupti_bad_connections")-before.sum("otelcol_receiver_cupti_bad_connections"))
	// The good CUPTI client's records all arrived, besides the real trace's.
	assert.GreaterOrEqual(t, s.sum("otelcol_receiver_cupti_records")-baseRecords, float64(cc.records.Load()))
	out := r.c.Output()
	for _, want := range []string{"kineto trace skipped", "truncated.json.gz", "oversized.json"} {
		assert.Contains(t, out, want, "the collector says what was wrong")
	}

	r.addf("\n### Malformed input\n")
	r.addf("OTLP/HTTP garbage, truncated and 21 MiB bodies answered 4xx; a 5 MiB gRPC request ResourceExhausted; %d bad step datagrams, a step ring with an impossible write index and 3 bad CUPTI connections counted and dropped; a truncated and an oversized Kineto file skipped with a warning naming the file. Meanwhile %d good spans, 101 steps (100 datagrams, 1 ring record), %d CUPTI records and the real Kineto trace all arrived; the collector stayed up.",
		badSteps, spans.accepted.Load(), cc.records.Load())
}
