# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of sglang/srt/model_executor/forward_batch_info.py ForwardMode
(sgl-project/sglang @271a25bc): MIXED (a prefill with running decodes merged
in) counts as extend, IDLE is the empty batch DP attention runs on ranks
without work.
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).
"""

import enum


class ForwardMode(enum.IntEnum):
    EXTEND = 1
    DECODE = 2
    MIXED = 3
    IDLE = 4

    def is_extend(self):
        return self in (ForwardMode.EXTEND, ForwardMode.MIXED)

    def is_decode(self):
        return self == ForwardMode.DECODE

    def is_idle(self):
        return self == ForwardMode.IDLE

    def is_prebuilt(self):
        return False
