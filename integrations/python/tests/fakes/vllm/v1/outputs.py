# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/outputs.py: ModelRunnerOutput (req_ids, req_id_to_index,
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
sampled_token_ids: one list of new token ids per request, empty for a
prefill chunk that samples nothing)."""

from dataclasses import dataclass


@dataclass
class ModelRunnerOutput:
    req_ids: list
    req_id_to_index: dict
    sampled_token_ids: list


EMPTY_MODEL_RUNNER_OUTPUT = ModelRunnerOutput([], {}, [])
