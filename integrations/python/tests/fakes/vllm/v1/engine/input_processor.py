# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/engine/input_processor.py (vllm-project/vllm @009daaee),
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
InputProcessor.assign_request_id: the API id moves to external_req_id and
the engine's id becomes f"{external}-{random8}"."""

import uuid


class InputProcessor:
    @staticmethod
    def assign_request_id(request):
        if request.external_req_id is not None:
            raise ValueError("The external_req_id field should not be set on EngineCoreRequests")
        request.external_req_id = request.request_id
        request.request_id = f"{request.external_req_id}-{uuid.uuid4().hex:.8}"
