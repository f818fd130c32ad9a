// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/stepwire"
)

// pace returns how many items are due after elapsed at rate per second,
// less those already sent: senders catch up after a stall instead of
// drifting below the rate.
func pace(start time.Time, rate float64, sent int64) int64 {
	return int64(time.Since(start).Seconds()*rate) - sent
}

// spanBatches are OTLP/HTTP protobuf bodies of vLLM request spans, shaped as
// vllm/tracing.py writes llm_request (the attributes e2e/default_config_test
// uses), marshalled once so that the sender costs little next to the
// collector. Each batch has its own trace and span ids.
func spanBatches(n, per int) [][]byte {
	out := make([][]byte, n)
	end := time.Now()
	for b := range n {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "vllm")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		spans.EnsureCapacity(per)
		for i := range per {
			s := spans.AppendEmpty()
			s.SetName("llm_request")
			s.SetKind(ptrace.SpanKindServer)
			s.SetTraceID(pcommon.TraceID{0xa0, byte(b >> 8), byte(b), byte(i >> 8), byte(i), 1})
			s.SetSpanID(pcommon.SpanID{0xb0, byte(b >> 8), byte(b), byte(i >> 8), byte(i), 1})
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-1500 * time.Millisecond)))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
			a := s.Attributes()
			a.PutStr("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
			a.PutStr("gen_ai.request.id", fmt.Sprintf("cmpl-soak-%d-%d", b, i))
			a.PutDouble("gen_ai.request.temperature", 0.7)
			a.PutDouble("gen_ai.request.top_p", 0.95)
			a.PutInt("gen_ai.request.max_tokens", 128)
			a.PutInt("gen_ai.request.n", 1)
			a.PutInt("gen_ai.usage.prompt_tokens", 42)
			a.PutInt("gen_ai.usage.completion_tokens", 17)
			a.PutDouble("gen_ai.latency.time_in_queue", 0.05)
			a.PutDouble("gen_ai.latency.time_to_first_token", 0.2)
			a.PutDouble("gen_ai.latency.e2e", 1.5)
			a.PutDouble("gen_ai.latency.time_in_scheduler", 0.01)
			a.PutDouble("gen_ai.latency.time_in_model_forward", 1.1)
			a.PutDouble("gen_ai.latency.time_in_model_execute", 1.2)
			a.PutDouble("gen_ai.latency.time_in_model_prefill", 0.14)
			a.PutDouble("gen_ai.latency.time_in_model_decode", 1.25)
			a.PutDouble("gen_ai.latency.time_in_model_inference", 1.39)
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			panic(err)
		}
		out[b] = body
	}
	return out
}

// spanSender posts request-span batches over OTLP/HTTP at a target rate. A
// refused batch (memory_limiter says 429/503) is sent again, as an SDK's
// exporter retries it, so every span is eventually accepted.
type spanSender struct {
	url      string
	batches  [][]byte
	per      int
	accepted atomic.Int64 // spans
	refused  atomic.Int64 // batch attempts refused
}

func (s *spanSender) run(ctx context.Context, rate float64, workers int) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	start := time.Now()
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for ctx.Err() == nil {
				if rate > 0 && pace(start, rate/float64(s.per), next.Load()) <= 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				b := next.Add(1)
				if err := s.post(ctx, client, s.batches[int(b)%len(s.batches)]); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func (s *spanSender) post(ctx context.Context, client *http.Client, body []byte) error {
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("otlp post: %w", err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			s.accepted.Add(int64(s.per))
			return nil
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			s.refused.Add(1)
		default:
			return fmt.Errorf("otlp post: unexpected %s", resp.Status)
		}
		// A refused batch must still get in, even while stopping: the
		// nothing-lost check counts it as sent.
		time.Sleep(backoff)
	}
}

// stepEngines sends engine step datagrams from n engines at rate each, with
// the real wire format (internal/stepwire; the hook's Python encoder writes
// the same bytes). Like the hook, a send that would block is dropped and
// counted on the sender's side, never waited for.
type stepEngines struct {
	sock    string
	sent    atomic.Int64
	dropped atomic.Int64
}

func (e *stepEngines) run(ctx context.Context, engines int, rate float64) error {
	var wg sync.WaitGroup
	errc := make(chan error, engines)
	for eng := range engines {
		wg.Go(func() {
			c, err := net.Dial("unixgram", e.sock)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			ids := make([]string, 16)
			toks := make([]int64, 16)
			for i := range ids {
				ids[i] = fmt.Sprintf("cmpl-soak-e%d-%d", eng, i)
				toks[i] = 1
			}
			start := time.Now()
			var n int64
			for ctx.Err() == nil {
				if pace(start, rate, n) <= 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				n++
				now := time.Now()
				st := &stepwire.Step{
					Engine: stepwire.EngineVLLM, Flags: stepwire.FlagKVUsage, PID: uint32(50000 + eng), Index: uint64(n),
					StartUnixNs: now.Add(-4 * time.Millisecond).UnixNano(), EndUnixNs: now.UnixNano(),
					PrefillRequests: 1, DecodeRequests: 15, ScheduledTokens: 527, Running: 16, Waiting: 3, KVUsage: 0.4,
					ServiceName: fmt.Sprintf("vllm-%d", eng), EngineVersion: "0.11.0", Host: "soak",
					RequestIDs: ids, RequestTokens: toks,
				}
				_ = c.SetWriteDeadline(time.Now().Add(time.Millisecond))
				if _, err := c.Write(stepwire.Encode(st)); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
						e.dropped.Add(1)
						continue
					}
					errc <- fmt.Errorf("step send: %w", err)
					return
				}
				e.sent.Add(1)
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// cuptiClients stream kernel records from conns engine processes over the
// real cuptiwire framing, as native/cupti's library does: hello, the kernel
// names, then records frames. Stream sockets block, so nothing is dropped
// on the way; the collector's own counters must account for every record.
type cuptiClients struct {
	sock    string
	records atomic.Int64
}

var soakKernels = []string{
	"void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)",
	"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
	"void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
	"void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, c10::BFloat16 const*, int)",
	"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
}

func (c *cuptiClients) run(ctx context.Context, conns int, rate float64) error {
	const perFrame = 4096
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for w := range conns {
		wg.Go(func() {
			conn, err := net.Dial("unix", c.sock)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close()
			b := cuptiwire.AppendHello(nil, uint32(60000+w), uint64(time.Now().UnixNano()), "soak")
			for i, k := range soakKernels {
				b = cuptiwire.AppendString(b, uint32(i+1), k)
			}
			if _, err := conn.Write(b); err != nil {
				errc <- err
				return
			}
			recs := make([]cuptiwire.Record, perFrame)
			base := uint64(time.Now().UnixNano())
			for i := range recs {
				start := base + uint64(i)*3000
				recs[i] = cuptiwire.Record{
					Kind: cuptiwire.RecordKindKernel, Device: 0, Stream: 7,
					Start: start, End: start + 2500, Name: uint32(i%len(soakKernels) + 1), Correlation: uint32(i),
				}
			}
			frame := cuptiwire.AppendRecords(nil, recs)
			start := time.Now()
			var sent int64
			for ctx.Err() == nil {
				if pace(start, rate/float64(conns), sent) < perFrame {
					time.Sleep(time.Millisecond)
					continue
				}
				if _, err := conn.Write(frame); err != nil {
					errc <- fmt.Errorf("cupti send: %w", err)
					return
				}
				sent += perFrame
				c.records.Add(perFrame)
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
