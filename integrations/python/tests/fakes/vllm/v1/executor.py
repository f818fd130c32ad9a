# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The GPU of the fake vLLM engine: execute_model and sample_tokens as
EngineCore calls them (vllm/v1/engine/core.py @00080ee1), returning futures.

A batch occupies the fake GPU for step_time seconds, after the previous
batch: with the batch queue, batch N+1 is launched while N still runs, and
its result is ready step_time after N's. A request samples tokens unless
its scheduled tokens are a prefill chunk that does not reach the end of its
prompt (Request.is_prefill_chunk, set by the scheduler); with drafts it
samples 1 + the accepted drafts (Request.accept, cycled).
"""

import time

from guard import tokens
from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT, ModelRunnerOutput


class GPUFuture:
    def __init__(self, value, ready_at):
        self._value = value
        self._ready_at = ready_at

    def result(self):
        wait = self._ready_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if isinstance(self._value, BaseException):
            raise self._value
        return self._value


class Executor:
    def __init__(self, scheduler, step_time=0.0):
        self.scheduler = scheduler
        self.step_time = step_time
        self._free_at = 0.0
        self._pending = None
        self.fail = None  # an exception execute_model raises, for tests

    def execute_model(self, scheduler_output, non_block=False):
        if self.fail is not None:
            raise self.fail
        now = time.monotonic()
        ready = max(now, self._free_at) + (self.step_time if scheduler_output.total_num_scheduled_tokens else 0)
        self._free_at = ready
        if not scheduler_output.total_num_scheduled_tokens:
            self._pending = None
            return GPUFuture(EMPTY_MODEL_RUNNER_OUTPUT, ready)
        req_ids, sampled = [], []
        for rid in scheduler_output.num_scheduled_tokens:
            req = self.scheduler.requests[rid]
            req_ids.append(rid)
            if req.is_prefill_chunk:
                sampled.append(tokens(0))
                continue
            n = 1
            drafts = scheduler_output.scheduled_spec_decode_tokens.get(rid)
            if drafts and req.accept:
                n += min(len(drafts), req.accept[req.num_output_tokens % len(req.accept)])
            sampled.append(tokens(n))
        self._pending = GPUFuture(ModelRunnerOutput(req_ids, {r: i for i, r in enumerate(req_ids)}, sampled), ready)
        # Sampling is a separate call (sample_tokens); execute_model's own
        # future then holds None, as in vLLM.
        return GPUFuture(None, ready)

    def sample_tokens(self, grammar_output, non_block=False):
        fut, self._pending = self._pending, None
        return fut if non_block else fut.result()

    def take_draft_token_ids(self):
        """Drafts for the next step (sync scheduling): k per decoding request with accept set."""
        out = {}
        for req in self.scheduler.running:
            if req.accept and not req.is_prefill_chunk:
                out[req.request_id] = [0] * max(req.accept)
        return out
