# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake of the vllm.v1.core.sched package.
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
"""
