// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"golang.org/x/sys/unix"

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

// stepEngines sends engine step records from n engines at rate each, the
// way the hook does (integrations/python/inferprof_hook): each engine writes
// the real wire format (internal/stepwire) into its own shared-memory ring
// (stepRing), announced once to the receiver's socket. Like the hook, a
// record that does not fit in the ring is dropped and counted on the
// sender's side, never waited for.
type stepEngines struct {
	sock    string
	sent    atomic.Int64
	dropped atomic.Int64
}

// ringBytes is the hook's default ring capacity (INFERPROF_STEP_RING_BYTES).
const ringBytes = 4 << 20

func (e *stepEngines) run(ctx context.Context, engines int, rate float64) error {
	var wg sync.WaitGroup
	errc := make(chan error, engines)
	for eng := range engines {
		wg.Go(func() {
			ring, err := openStepRing(e.sock, uint64(0x50a4_0000+eng), ringBytes)
			if err != nil {
				errc <- err
				return
			}
			defer ring.close()
			if err := ring.announce(); err != nil {
				errc <- err
				return
			}
			ids := make([]string, 16)
			toks := make([]int64, 16)
			for i := range ids {
				ids[i] = fmt.Sprintf("cmpl-soak-e%d-%d", eng, i)
				toks[i] = 1
			}
			start := time.Now()
			var n int64
			var dropped uint32
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
					InstanceID: fmt.Sprintf("soak-engine-%d", eng), HookDropped: dropped,
					RequestIDs: ids, RequestTokens: toks,
				}
				ok, err := ring.write(stepwire.Encode(st))
				if err != nil {
					errc <- fmt.Errorf("step ring: %w", err)
					return
				}
				if !ok {
					dropped++
					e.dropped.Add(1)
					continue
				}
				e.sent.Add(1)
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// stepRing is one engine's step ring, made as the hook's ring.py makes it
// (docs/step-wire.md, "Ring"): a memfd sealed against resizing, holding a
// 4096-byte header and the records; announced with a control datagram that
// carries the memfd and the read end of a pipe only this side writes to;
// and, after a record, one wake datagram per sleep of the reader.
type stepRing struct {
	path  string
	id    uint64
	memfd int
	pipe  [2]int
	mem   []byte
	w     *stepwire.RingWriter
	woken uint64
}

func openStepRing(path string, id uint64, capacity int) (*stepRing, error) {
	fd, err := unix.MemfdCreate("inferprof-step-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	r := &stepRing{path: path, id: id, memfd: fd, pipe: [2]int{-1, -1}}
	size := stepwire.RingHeaderBytes + capacity
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		r.close()
		return nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		r.close()
		return nil, err
	}
	if r.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		r.close()
		return nil, err
	}
	if err := unix.Pipe2(r.pipe[:], unix.O_CLOEXEC); err != nil {
		r.close()
		return nil, err
	}
	r.w = stepwire.NewRingWriter(r.mem, id, uint32(os.Getpid()))
	return r, nil
}

func (r *stepRing) control(kind byte, fds ...int) error {
	b := make([]byte, stepwire.ControlSize)
	copy(b, stepwire.RingMagic[:])
	b[4] = stepwire.RingVersion
	b[5] = kind
	binary.LittleEndian.PutUint64(b[8:], r.id)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return unix.Sendmsg(fd, b, oob, &unix.SockaddrUnix{Name: r.path}, 0)
}

func (r *stepRing) announce() error {
	return r.control(stepwire.ControlAnnounce, r.memfd, r.pipe[0])
}

// write publishes one record; false when the ring is full (the hook drops
// the step then).
func (r *stepRing) write(rec []byte) (bool, error) {
	if !r.w.Write(rec) {
		return false, nil
	}
	// The reader's sleep word (byte 136) is odd while it waits on its socket.
	if sleep := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[136]))); sleep&1 == 1 && sleep != r.woken {
		r.woken = sleep
		return true, r.control(stepwire.ControlWake)
	}
	return true, nil
}

// close lets go of the ring as the engine's exit would: the receiver sees
// the pipe close, reads what is left and releases it.
func (r *stepRing) close() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
	}
	for _, fd := range []int{r.memfd, r.pipe[0], r.pipe[1]} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
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
