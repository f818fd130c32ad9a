# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/engine/__init__.py: EngineCoreRequest, EngineCoreOutput(s).
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).

EngineCoreRequest carries request_id (the engine's own id once
InputProcessor.assign_request_id ran) and external_req_id (the API id); the
real one is a msgspec struct with many more fields. EngineCoreOutputs is
returned by update_from_output as dict[client_index, EngineCoreOutputs].
"""

import enum

from guard import tokens


class FinishReason(enum.IntEnum):
    STOP = 0
    LENGTH = 1
    ABORT = 2


class EngineCoreRequest:
    def __init__(self, request_id, prompt_len, max_tokens, arrival_time=0.0, client_index=0,
                 accept=None, remote_kv_wait=0, structured=False):
        self.request_id = request_id
        self.external_req_id = None
        self.prompt_token_ids = tokens(prompt_len)
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.arrival_time = arrival_time
        self.client_index = client_index
        self.current_wave = 0
        # Test knobs carried to the engine-side Request (see vllm.v1.request).
        self.accept = accept
        self.remote_kv_wait = remote_kv_wait
        # Stands for sampling_params.structured_outputs being set.
        self.structured = structured


class EngineCoreOutput:
    __slots__ = ("request_id", "new_token_ids", "finish_reason")

    def __init__(self, request_id, new_token_ids, finish_reason=None):
        self.request_id = request_id
        self.new_token_ids = new_token_ids
        self.finish_reason = finish_reason


class EngineCoreOutputs:
    __slots__ = ("outputs", "scheduler_stats", "engine_index", "finished_requests")

    def __init__(self, outputs=(), finished_requests=None, engine_index=0):
        self.outputs = list(outputs)
        self.scheduler_stats = None
        self.engine_index = engine_index
        self.finished_requests = finished_requests


class EngineCoreRequestType(enum.Enum):
    ADD = b"\x00"
    ABORT = b"\x01"
