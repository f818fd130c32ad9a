# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of sglang/srt/layers/dp_attention.py compute_dp_attention_world_info,
as Scheduler.__init__ (scheduler.py @0003215c) calls it: the rank layout is
(dp, cp, tp), tp changing fastest.
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).
"""


def compute_dp_attention_world_info(enable_dp_attention, tp_rank, tp_size, dp_size, attn_cp_size=1):
    attn_dp_size = dp_size if enable_dp_attention else 1
    attn_tp_size = tp_size // attn_dp_size // attn_cp_size
    attn_tp_rank = tp_rank % attn_tp_size
    if not enable_dp_attention:
        attn_dp_rank = 0
    else:
        attn_dp_rank = tp_rank // (attn_tp_size * attn_cp_size)
    return attn_tp_rank, attn_tp_size, attn_dp_rank, attn_dp_size
