# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/core/sched/output.py (vllm-project/vllm @00e8f1fd).
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).

The fields the hook reads, with the real names and meanings:
SchedulerOutput.scheduled_new_reqs (NewRequestData), scheduled_cached_reqs
(CachedRequestData: req_ids, resumed_req_ids, num_computed_tokens,
num_output_tokens = outputs + placeholders), num_scheduled_tokens,
total_num_scheduled_tokens, scheduled_spec_decode_tokens, finished_req_ids
(requests that finished, aborts included, between the previous schedule()
and this one), preempted_req_ids.
"""

from dataclasses import dataclass, field


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list
    num_computed_tokens: int


@dataclass
class CachedRequestData:
    req_ids: list
    # Requests that come back from preemption in this step.
    resumed_req_ids: set
    num_computed_tokens: list
    # Output tokens plus async placeholders, aligned with req_ids.
    num_output_tokens: list

    @classmethod
    def make_empty(cls):
        return cls([], set(), [], [])


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict
    finished_req_ids: set
    preempted_req_ids: set = field(default_factory=set)
    pending_structured_output_tokens: bool = False
