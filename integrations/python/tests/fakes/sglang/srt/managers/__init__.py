# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake of the sglang.srt.managers package.
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).
"""
