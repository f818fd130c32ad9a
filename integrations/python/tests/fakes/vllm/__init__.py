# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake vLLM v1 engine, shaped like vllm-project/vllm; each module names the file and commit it follows.
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
"""
