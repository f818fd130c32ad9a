# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/request.py: the engine-side Request and RequestStatus.
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).

Follows the fields vllm-project/vllm's scheduler (v1/core/sched/scheduler.py
@00024d31) uses: num_computed_tokens, num_output_placeholders (async
scheduling), spec_token_ids, status, num_preemptions; num_tokens is prompt
plus outputs. Like some real versions, it keeps no external_req_id: the API
id reaches the engine only on the EngineCoreRequest.
"""

import enum

from guard import tokens


class RequestStatus(enum.IntEnum):
    WAITING = 1
    WAITING_FOR_FSM = 2
    WAITING_FOR_REMOTE_KVS = 3
    RUNNING = 4
    PREEMPTED = 5
    FINISHED_STOPPED = 6
    FINISHED_LENGTH_CAPPED = 7
    FINISHED_ABORTED = 8

    @staticmethod
    def is_finished(status):
        return status >= RequestStatus.FINISHED_STOPPED


class Request:
    def __init__(self, request_id, prompt_len, max_tokens, client_index=0, arrival_time=0.0):
        self.request_id = request_id
        self.client_index = client_index
        self.prompt_token_ids = tokens(prompt_len)
        self.num_prompt_tokens = prompt_len
        self._output_token_ids = tokens(0)
        self.max_tokens = max_tokens
        self.num_computed_tokens = 0
        self.num_output_placeholders = 0
        self.spec_token_ids = []
        self.status = RequestStatus.WAITING
        self.num_preemptions = 0
        self.is_prefill_chunk = False
        self.arrival_time = arrival_time
        # Test knobs, not vLLM's: accepted draft tokens per decode step
        # (cycled), and schedule() calls to spend waiting for remote KV.
        self.accept = None
        self.remote_kv_wait = 0
        # vLLM's property (sampling_params.structured_outputs is set).
        self.use_structured_output = False
        # Ground truth for the tests: whether the prompt (or, after a
        # preemption, prompt and outputs) has been fully scheduled.
        self.prefilled = False

    @classmethod
    def from_engine_core_request(cls, req, block_hasher=None):
        r = cls(req.request_id, req.prompt_len, req.max_tokens, req.client_index, req.arrival_time)
        r.accept = req.accept
        r.remote_kv_wait = req.remote_kv_wait
        r.use_structured_output = req.structured
        if r.remote_kv_wait:
            r.status = RequestStatus.WAITING_FOR_REMOTE_KVS
        return r

    @property
    def num_output_tokens(self):
        return len(self._output_token_ids)

    @property
    def num_tokens(self):
        return self.num_prompt_tokens + len(self._output_token_ids)

    @property
    def num_tokens_with_spec(self):
        return self.num_tokens + len(self.spec_token_ids)

    def is_finished(self):
        return RequestStatus.is_finished(self.status)

    def get_finished_reason(self):
        return {RequestStatus.FINISHED_STOPPED: "stop", RequestStatus.FINISHED_LENGTH_CAPPED: "length",
                RequestStatus.FINISHED_ABORTED: "abort"}.get(self.status)
