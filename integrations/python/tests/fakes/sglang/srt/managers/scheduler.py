# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of sglang/srt/managers/scheduler.py (sgl-project/sglang @0003215c).
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).

The call structure is the real one:
- __init__ computes the attention-TP/DP ranks with
  compute_dp_attention_world_info and keeps every rank in self.ps, a
  ParallelState; every TP rank of a server runs its own Scheduler with the
  same loop.
- get_next_batch_to_run(running_batch, last_batch) merges the last prefill
  batch into the running batch, prefers a new prefill batch, else calls
  update_running_batch(running_batch), which filters finished requests and,
  when the next decode step does not fit in the KV pool, retracts requests
  (batch.retract_decode) back to the waiting queue; it returns a
  NextBatchPlan. Under DP attention a rank without work runs IDLE batches
  in step with its peers.
- run_batch(batch) launches the forward; process_batch_result(batch,
  result) appends each request's new tokens to req.output_ids.
- event_loop_normal: get_next_batch_to_run, run_batch, process_batch_result
  in turn. event_loop_overlap (the default): run_batch(N), then
  result_queue.append((batch.copy(), result)), then process the previous
  batch, so process_batch_result(N-1) runs while N is on the GPU and gets a
  copy, not the batch run_batch saw. A request that finished in N-1 is still
  in N; its tokens from N are dropped. With
  SGLANG_DISABLE_CONSECUTIVE_PREFILL_OVERLAP (here the constructor's
  disable_consecutive_prefill_overlap) a prefill after a prefill first
  processes the previous batch (is_disable_overlap_for_batch). After
  processing, launch_batch_sample_if_needed(result, batch) launches the
  current batch's sampling when it was delayed (delay_sample_func: a
  grammar that needs the previous batch's tokens).

Where the GPU work is launched (with a fake GPU, tests/fakes/gpu.py), all
on the scheduler thread, as in the real file: get_next_batch_to_run
prepares the batch it returns (prepare_for_extend/prepare_for_decode write
the requests' KV slots, write_req_to_token_pool_triton); run_batch launches
the forward on forward_stream (a CUDA graph for decode, eager kernels for
extend) and the sampling unless delayed; launch_batch_sample_if_needed the
delayed sampling; process_batch_result frees the KV of requests that
finished (the allocator's free is a torch.cat on the device).

The real loops run until the process ends; these end when every scripted
arrival was served (gracefully_exit). Requests arrive from self.arrivals
(loop iteration -> [Req]) instead of the tokenizer's socket. A batch
occupies the fake GPU for step_time seconds.

For the tests every processed batch is recorded in self.truth from the
fake's own bookkeeping: run_batch puts the batch's make-up in its result,
process_batch_result adds the tokens it appended.
"""

import collections
import time

from gpu import ATTN, CAT, GEMM, KV_SLOTS, NORM, SAMPLE
from sglang.srt.distributed.parallel_state_wrapper import ParallelState
from sglang.srt.layers.dp_attention import compute_dp_attention_world_info
from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req, ScheduleBatch  # noqa: F401
from sglang.srt.model_executor.forward_batch_info import ForwardMode

__all__ = ["Req", "Scheduler", "ServerArgs", "ranks"]


class ServerArgs:
    def __init__(self, tp_size=1, dp_size=1, pp_size=1, attn_cp_size=1, enable_dp_attention=False,
                 disable_overlap_schedule=False, max_running_requests=8):
        self.tp_size = tp_size
        self.dp_size = dp_size
        self.pp_size = pp_size
        self.attn_cp_size = attn_cp_size
        self.enable_dp_attention = enable_dp_attention
        self.disable_overlap_schedule = disable_overlap_schedule
        self.max_running_requests = max_running_requests
        self.speculative_algorithm = None


class NextBatchPlan:
    def __init__(self, batch_to_run, running_batch):
        self.batch_to_run = batch_to_run
        self.running_batch = running_batch


class GenerationBatchResult:
    def __init__(self, ready_at, truth, batch=0):
        self.ready_at = ready_at
        self.truth = truth
        self.batch = batch  # the fake's forward_ct of the batch (ground truth)
        self.delay_sample_func = None


class TokenToKVPoolAllocator:
    """Capacity in tokens; a request holds its prompt and outputs."""

    def __init__(self, sched, size):
        self._sched = sched
        self.size = size

    def available_size(self):
        return self.size - sum(r.seqlen for r in self._sched.live)

    def fits(self, reqs):
        # The next decode step adds one token per request.
        return self.size - sum(r.seqlen + 1 for r in reqs) >= 0


class TreeCache:
    def evictable_size(self):
        return 0


def ranks(server_args):
    """(tp_rank, attn_dp_rank) of every scheduler a server starts."""
    out = []
    for tp_rank in range(server_args.tp_size):
        _, _, attn_dp_rank, _ = compute_dp_attention_world_info(
            server_args.enable_dp_attention, tp_rank, server_args.tp_size, server_args.dp_size,
            server_args.attn_cp_size)
        out.append((tp_rank, attn_dp_rank))
    return out


class Scheduler:
    def __init__(self, server_args, port_args=None, gpu_id=0, tp_rank=0, moe_ep_rank=0, pp_rank=0,
                 attn_cp_rank=0, moe_dp_rank=0, dp_rank=None, kv_tokens=4096, step_time=0.0,
                 arrivals=None, gpu=None, disable_consecutive_prefill_overlap=False, overlap_thread=False):
        self.server_args = server_args
        attn_tp_rank, attn_tp_size, attn_dp_rank, attn_dp_size = compute_dp_attention_world_info(
            server_args.enable_dp_attention, tp_rank, server_args.tp_size, server_args.dp_size,
            server_args.attn_cp_size)
        self.ps = ParallelState(
            tp_rank=tp_rank, tp_size=server_args.tp_size, pp_rank=pp_rank, pp_size=server_args.pp_size,
            dp_rank=dp_rank, dp_size=server_args.dp_size, attn_tp_rank=attn_tp_rank,
            attn_tp_size=attn_tp_size, attn_cp_rank=attn_cp_rank, attn_cp_size=server_args.attn_cp_size,
            attn_dp_rank=attn_dp_rank, attn_dp_size=attn_dp_size, moe_ep_rank=moe_ep_rank,
            moe_dp_rank=moe_dp_rank, gpu_id=gpu_id)
        self.enable_overlap = not server_args.disable_overlap_schedule
        self.max_running_requests = server_args.max_running_requests
        self.waiting_queue = []
        self.running_batch = ScheduleBatch([], enable_overlap=self.enable_overlap)
        self.last_batch = None
        self.chunked_req = None
        self.max_total_num_tokens = kv_tokens
        self.live = []
        self.token_to_kv_pool_allocator = TokenToKVPoolAllocator(self, kv_tokens)
        self.running_batch.token_to_kv_pool_allocator = self.token_to_kv_pool_allocator
        self.tree_cache = TreeCache()
        self.forward_ct = 0
        self.gracefully_exit = False
        self.result_queue = collections.deque()
        self.step_time = step_time
        self._gpu_free_at = 0.0
        self.arrivals = dict(arrivals or {})
        self.iteration = 0
        self.truth = []
        self.gpu = gpu
        self.disable_consecutive_prefill_overlap = disable_consecutive_prefill_overlap
        # Older SGLang: the forward runs on TpModelWorkerClient's thread.
        self.tp_worker = None
        if overlap_thread and self.enable_overlap and gpu is not None:
            from sglang.srt.managers.tp_worker_overlap_thread import TpModelWorkerClient

            self.tp_worker = TpModelWorkerClient(gpu)

    # -- requests ---------------------------------------------------------

    def recv_requests(self):
        self.iteration += 1
        return self.arrivals.pop(self.iteration, [])

    def process_input_requests(self, recv_reqs):
        for req in recv_reqs:
            self._add_request_to_queue(req)
        if not self.arrivals and self.is_fully_idle():
            self.gracefully_exit = True

    def _add_request_to_queue(self, req, is_retracted=False):
        if is_retracted:
            self.waiting_queue.insert(0, req)
        else:
            self.waiting_queue.append(req)

    def is_fully_idle(self):
        return (self.running_batch.is_empty() and not self.waiting_queue
                and (self.last_batch is None or self.last_batch.is_empty())
                and len(self.result_queue) == 0)

    # -- scheduling -------------------------------------------------------

    def get_next_batch_to_run(self, running_batch, last_batch):
        if last_batch and last_batch.forward_mode.is_extend():
            last_batch.filter_batch()
            if not last_batch.is_empty():
                if running_batch.is_empty():
                    running_batch = last_batch
                else:
                    running_batch.merge_batch(last_batch)
        new_batch = self.get_new_batch_prefill(running_batch)
        if new_batch is not None:
            ret = new_batch
        elif not running_batch.is_empty():
            running_batch = self.update_running_batch(running_batch)
            ret = running_batch if not running_batch.is_empty() else None
        else:
            ret = None
        if ret is None and self.server_args.enable_dp_attention and self.arrivals:
            # A rank without work runs an empty batch with its DP peers.
            ret = ScheduleBatch([], ForwardMode.IDLE, enable_overlap=self.enable_overlap)
        if ret is not None and self.gpu is not None and not ret.forward_mode.is_idle():
            # The batch's KV slots, written by prepare_for_extend/decode; run_batch
            # gives it the next forward_ct.
            self.gpu.launch(self.forward_ct + 1, [(KV_SLOTS, 40 if ret.forward_mode.is_extend() else 15)])
        return NextBatchPlan(batch_to_run=ret, running_batch=running_batch)

    def get_new_batch_prefill(self, running_batch):
        if not self.waiting_queue:
            return None
        room = self.max_running_requests - len(running_batch.reqs)
        can_run = []
        used = sum(r.seqlen + 1 for r in self.live)
        for req in list(self.waiting_queue):
            if len(can_run) >= room or used + req.seqlen + 1 > self.max_total_num_tokens:
                break
            can_run.append(req)
            used += req.seqlen + 1
        if not can_run:
            return None
        self.waiting_queue = self.waiting_queue[len(can_run):]
        self.live.extend(can_run)
        batch = ScheduleBatch.init_new(can_run, self.token_to_kv_pool_allocator, self.enable_overlap)
        batch.prepare_for_extend()
        return batch

    def update_running_batch(self, batch):
        batch.filter_batch()
        if batch.is_empty():
            return batch
        batch.token_to_kv_pool_allocator = self.token_to_kv_pool_allocator
        if not batch.check_decode_mem():
            retracted, _, _ = batch.retract_decode(self.server_args)
            for req in retracted:
                self.live.remove(req)
                self._add_request_to_queue(req, is_retracted=True)
            batch.fake_retracted = [r.rid for r in retracted]  # ground truth only
        if batch.is_empty():
            return batch
        batch.prepare_for_decode()
        return batch

    # -- forward ----------------------------------------------------------

    def run_batch(self, batch, pp_proxy_tensors=None):
        self.forward_ct += 1
        batch.launch_ts = time.monotonic()
        fm = batch.forward_mode
        truth = None
        if not fm.is_idle():
            decoding = len(batch.decoding_reqs) if batch.decoding_reqs else 0
            resumed = [r.rid for r in batch.reqs if r.is_retracted] if fm.is_extend() else []
            for r in batch.reqs:
                r.is_retracted = False
            truth = {
                "prefill": len(batch.reqs) - decoding if fm.is_extend() else 0,
                "decode": decoding if fm.is_extend() else len(batch.reqs),
                "scheduled_tokens": getattr(batch, "extend_num_tokens", 0) if fm.is_extend() else len(batch.reqs),
                "preempted": sorted(getattr(batch, "fake_retracted", ())),
                "resumed": sorted(resumed),
            }
            batch.fake_retracted = []
        if truth is not None:
            truth["batch"] = self.forward_ct
        now = time.monotonic()
        ready = max(now, self._gpu_free_at) + (0 if fm.is_idle() else self.step_time)
        self._gpu_free_at = ready
        result = GenerationBatchResult(ready, truth, self.forward_ct)
        gpu = self.gpu
        if self.tp_worker is not None and not fm.is_idle():
            from sglang.srt.managers.tp_worker_overlap_thread import ModelWorkerBatch

            self.tp_worker.forward_batch_generation(ModelWorkerBatch(
                self.forward_ct, fm.is_decode(), len(batch.reqs), batch.extend_num_tokens))
        elif gpu is not None and not fm.is_idle():
            n = len(batch.reqs)
            if fm.is_decode():
                gpu.launch(self.forward_ct, [(NORM, 150), (ATTN, 500 + 60 * n), (GEMM, 700)], graph=True)
            else:
                toks = batch.extend_num_tokens
                gpu.launch(self.forward_ct, [(NORM, 100), (ATTN, 200 + 20 * toks), (GEMM, 300 + 10 * toks)])
            if self.enable_overlap and any(r.grammar for r in batch.reqs):
                ct = self.forward_ct
                result.delay_sample_func = lambda: (gpu.launch(ct, [(SAMPLE, 120)]), result)[1]
            else:
                gpu.launch(self.forward_ct, [(SAMPLE, 120)])
        return result

    def launch_batch_sample_if_needed(self, batch_result, cur_batch):
        if batch_result is None or batch_result.delay_sample_func is None:
            return
        _batch_result = batch_result.delay_sample_func()
        assert _batch_result is batch_result

    def is_disable_overlap_for_batch(self, batch, last_batch):
        is_extend = lambda b: b and b.forward_mode.is_extend()  # noqa: E731
        return bool(self.disable_consecutive_prefill_overlap and is_extend(batch) and is_extend(last_batch))

    def process_batch_result(self, batch, result):
        if self.tp_worker is not None and result.truth is not None:
            self.tp_worker.resolve_batch_result(result.batch)
        elif self.gpu is not None:
            self.gpu.wait(result.batch)  # copy_done.synchronize()
        else:
            wait = result.ready_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # the overlap loop waits on the result's copy_done
        if result.truth is None:
            return  # idle
        ids, toks = [], []
        freed = 0
        for req in batch.reqs:
            if req.finished():
                continue  # overlap: finished in the previous batch, still in this one
            n = 1
            if batch.forward_mode.is_decode() and req.accept:
                n = req.accept[len(req.output_ids) % len(req.accept)]
            n = min(n, req.sampling_params.max_new_tokens - len(req.output_ids))
            list.extend(req.output_ids, [0] * n)
            ids.append(req.rid)
            toks.append(n)
            if len(req.output_ids) >= req.sampling_params.max_new_tokens:
                req.finished_reason = FINISH_LENGTH(len(req.output_ids))
                freed += 1
                if req in self.live:
                    self.live.remove(req)
        if freed and self.gpu is not None:
            self.gpu.launch(result.batch, [(CAT, 30)])  # release_kv_cache: free the KV slots
        t = dict(result.truth, request_ids=ids, request_tokens=toks)
        self.truth.append(t)

    # -- loops ------------------------------------------------------------

    def event_loop_normal(self):
        """A normal scheduler loop."""
        while True:
            if self.gracefully_exit:
                break
            self.process_input_requests(self.recv_requests())
            plan = self.get_next_batch_to_run(running_batch=self.running_batch, last_batch=self.last_batch)
            self.running_batch = plan.running_batch
            batch = plan.batch_to_run
            if batch:
                result = self.run_batch(batch)
                self.process_batch_result(batch, result)
            self.last_batch = batch

    def event_loop_overlap(self):
        """A scheduler loop that overlaps the CPU processing and GPU computation."""
        self.result_queue = collections.deque()

        def pop_and_process():
            tmp_batch, tmp_result = self.result_queue.popleft()
            self.process_batch_result(tmp_batch, tmp_result)

        while True:
            if self.gracefully_exit:
                break
            self.process_input_requests(self.recv_requests())
            plan = self.get_next_batch_to_run(running_batch=self.running_batch, last_batch=self.last_batch)
            self.running_batch = plan.running_batch
            batch = plan.batch_to_run
            disable_overlap_for_batch = self.is_disable_overlap_for_batch(batch, last_batch=self.last_batch)
            if disable_overlap_for_batch:
                pop_and_process()
            if batch:
                batch_result = self.run_batch(batch)
                self.result_queue.append((batch.copy(), batch_result))
            else:
                batch_result = None
            if self.last_batch:
                if not disable_overlap_for_batch:
                    pop_and_process()
            self.launch_batch_sample_if_needed(batch_result, batch)
            self.last_batch = batch

    def run_event_loop(self):
        if self.enable_overlap:
            self.event_loop_overlap()
        else:
            self.event_loop_normal()
        if self.tp_worker is not None:
            self.tp_worker.__delete__()
            self.tp_worker.forward_thread.join()
