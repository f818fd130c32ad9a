# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The GPU of the fake vLLM engine: execute_model and sample_tokens as
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
EngineCore calls them (vllm/v1/engine/core.py @00080ee1), returning futures.

It stands for vLLM's UniProcExecutor (vllm/v1/executor/uniproc_executor.py
@01e4fce0), the executor of a one-GPU engine: collective_rpc runs the
worker's method on the calling thread (run_method(self.driver_worker, ...)),
so the batch's kernels are launched inside the execute_model and
sample_tokens calls, on the engine thread; with non_block it hands back a
Future (the async output thread only waits for the result's copy).

Without a fake GPU, a batch occupies the device for step_time seconds,
after the previous batch: with the batch queue, batch N+1 is launched while
N still runs, and its result is ready step_time after N's. With one (gpu,
tests/fakes/gpu.py), execute_model launches the forward (one CUDA graph for
a batch where every request decodes one token, as vLLM replays a captured
graph for pure decode; eager kernels otherwise) and sample_tokens the
sampler, and a result is ready when its batch's kernels have run.

A request samples tokens unless its scheduled tokens are a prefill chunk
that does not reach the end of its prompt (Request.is_prefill_chunk, set by
the scheduler); with drafts it samples 1 + the accepted drafts
(Request.accept, cycled).

Ground truth: every execute_model call numbers its batch (from 1, as the
engine hook and vLLM's workers count them), tells the scheduler
(note_batch), and launches on the GPU under that number.
"""

import time

from gpu import ATTN, GEMM, NORM, SAMPLE
from guard import tokens
from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT, ModelRunnerOutput


class GPUFuture:
    def __init__(self, value, ready_at, gpu=None, batch=0):
        self._value = value
        self._ready_at = ready_at
        self._gpu = gpu
        self._batch = batch

    def result(self):
        if self._gpu is not None:
            self._gpu.wait(self._batch)
        else:
            wait = self._ready_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        if isinstance(self._value, BaseException):
            raise self._value
        return self._value


def forward_kernels(scheduler_output):
    """The forward's kernels: (kernels, graph). A pure decode batch replays
    one graph; anything with prompt tokens runs eagerly, scaled by tokens."""
    n = scheduler_output.total_num_scheduled_tokens
    decode = not scheduler_output.scheduled_new_reqs and n == len(scheduler_output.num_scheduled_tokens)
    if decode:
        return [(NORM, 150), (ATTN, 600 + 60 * n), (GEMM, 700), (GEMM, 400)], True
    return [(NORM, 100), (ATTN, 200 + 30 * n), (GEMM, 300 + 20 * n)], False


def model_output(scheduler, scheduler_output):
    """The ModelRunnerOutput of a batch: what each request samples."""
    req_ids, sampled = [], []
    for rid in scheduler_output.num_scheduled_tokens:
        req = scheduler.requests[rid]
        req_ids.append(rid)
        if req.is_prefill_chunk:
            sampled.append(tokens(0))
            continue
        k = 1
        drafts = scheduler_output.scheduled_spec_decode_tokens.get(rid)
        if drafts and req.accept:
            k += min(len(drafts), req.accept[req.num_output_tokens % len(req.accept)])
        sampled.append(tokens(k))
    return ModelRunnerOutput(req_ids, {r: i for i, r in enumerate(req_ids)}, sampled)


class Executor:
    def __init__(self, scheduler, step_time=0.0, gpu=None):
        self.scheduler = scheduler
        self.step_time = step_time
        self.gpu = gpu
        self.batches = 0
        self._free_at = 0.0
        self._pending = None
        self.fail = None  # an exception execute_model raises, for tests

    def execute_model(self, scheduler_output, non_block=False):
        if self.fail is not None:
            raise self.fail
        self.batches += 1
        n = self.batches
        self.scheduler.note_batch(scheduler_output, n)
        tokens_ = scheduler_output.total_num_scheduled_tokens
        gpu = self.gpu
        if gpu is not None and tokens_:
            kernels, graph = forward_kernels(scheduler_output)
            gpu.launch(n, kernels, graph)
        now = time.monotonic()
        ready = max(now, self._free_at) + (self.step_time if tokens_ else 0)
        self._free_at = ready
        if not tokens_:
            self._pending = None
            return GPUFuture(EMPTY_MODEL_RUNNER_OUTPUT, ready)
        self._pending = (model_output(self.scheduler, scheduler_output), ready, n)
        # Sampling is a separate call (sample_tokens); execute_model's own
        # future then holds None, as in vLLM.
        return GPUFuture(None, ready, gpu, n)

    def sample_tokens(self, grammar_output, non_block=False):
        out, self._pending = self._pending, None
        value, ready, n = out
        if self.gpu is not None:
            self.gpu.launch(n, [(SAMPLE, 120)])
        fut = GPUFuture(value, ready, self.gpu, n)
        return fut if non_block else fut.result()

    def take_draft_token_ids(self):
        """Drafts for the next step (sync scheduling): k per decoding request with accept set."""
        out = {}
        for req in self.scheduler.running:
            if req.accept and not req.is_prefill_chunk:
                out[req.request_id] = [0] * max(req.accept)
        return out
