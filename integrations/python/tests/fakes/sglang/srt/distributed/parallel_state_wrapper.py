# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of sglang/srt/distributed/parallel_state_wrapper.py (sgl-project/sglang
@1763e085): the frozen ParallelState the Scheduler keeps as self.ps.
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).
"""

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class ParallelState:
    tp_rank: int
    tp_size: int
    pp_rank: int
    pp_size: int
    dp_rank: Optional[int]
    dp_size: int
    attn_tp_rank: int
    attn_tp_size: int
    attn_cp_rank: int
    attn_cp_size: int
    attn_dp_rank: int
    attn_dp_size: int
    moe_ep_rank: int = 0
    moe_ep_size: int = 1
    moe_dp_rank: Optional[int] = 0
    moe_dp_size: int = 1
    dcp_size: int = 1
    gpu_id: int = 0
