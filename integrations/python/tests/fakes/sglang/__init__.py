# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake SGLang runtime, shaped like sgl-project/sglang; each module names the file and commit it follows.
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).
"""
