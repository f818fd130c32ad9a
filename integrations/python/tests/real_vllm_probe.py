# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Run by test_real_vllm.py with a Python that has the real vLLM installed
(not with the fakes): checks the patch table against vLLM's live classes
and drives the hook through two steps on real vLLM objects. Prints one JSON
object.

The engine and scheduler are real vLLM classes built without their
__init__ (that needs a model, a KV cache and an executor): their schedule
and update_from_output return real SchedulerOutput, NewRequestData,
CachedRequestData and EngineCoreOutputs, as vLLM's own would for a
two-request batch. Token id lists are guarded: reading a value raises.
"""

import dataclasses
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from inferprof_hook import _state, points, vllm as hook, wire  # noqa: E402


class Tokens(list):
    """A token id list the hook may count but never read."""

    def __iter__(self):
        raise AssertionError("the hook read a token id")

    def __getitem__(self, i):
        raise AssertionError("the hook read a token id")


class Capture:
    sent = dropped = 0

    def __init__(self):
        self.datagrams = []

    def send(self, data):
        self.datagrams.append(bytes(data))
        return True

    def close(self):
        pass

    def reset_after_fork(self):
        pass


def build(cls, **given):
    """A real dataclass instance: given fields, the rest None where they
    have no default (fields the hook does not read)."""
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name in given:
            kw[f.name] = given[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = None
    return cls(**kw)


def main():
    import vllm
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs
    from vllm.v1.engine.core import EngineCore

    out = {"vllm": vllm.__version__, "problems": {}}
    for part in ("engine", "worker"):
        req, opt = points.check(points.VLLM, part=part)
        out["problems"][part] = {"required": req, "optional": opt}
    # The table's methods and fields, read from the live classes.
    out["signatures"] = {p.describe(): points.problem(p, points.find_class(p)) for p in points.VLLM
                         if p.kind != points.ATTR}

    batches = []

    class Sched(Scheduler):
        # vLLM's own signatures; the bodies return what vLLM's would.
        def schedule(self, throttle_prefills=False):
            return batches.pop(0)[0]

        def update_from_output(self, scheduler_output, model_runner_output):
            return model_runner_output

    sched = object.__new__(Sched)
    sched.running = [object(), object()]
    sched.waiting = []
    sched.requests = {}
    kvm = object.__new__(KVCacheManager)

    class BlockPool:  # KVCacheManager.usage asks its block pool
        def get_usage(self):
            return 0.25

    kvm.block_pool = BlockPool()
    sched.kv_cache_manager = kvm
    core = object.__new__(EngineCore)
    core.scheduler = sched
    core.engine_index = 0

    def new(rid, n):
        return build(NewRequestData, req_id=rid, prompt_token_ids=Tokens([0] * n), block_ids=([],),
                     num_computed_tokens=0, mm_features=[])

    first = build(SchedulerOutput, scheduled_new_reqs=[new("a-1", 5), new("b-2", 3)],
                  scheduled_cached_reqs=CachedRequestData.make_empty(),
                  num_scheduled_tokens={"a-1": 5, "b-2": 3}, total_num_scheduled_tokens=8,
                  scheduled_spec_decode_tokens={}, scheduled_encoder_inputs={}, finished_req_ids=set(),
                  free_encoder_mm_hashes=[])
    cached = CachedRequestData.make_empty()
    cached.req_ids[:] = ["a-1", "b-2"]
    cached.num_computed_tokens[:] = [5, 3]
    cached.num_output_tokens[:] = [1, 1]
    for f in ("new_token_ids", "new_block_ids"):
        if isinstance(getattr(cached, f, None), list):
            getattr(cached, f)[:] = [None, None]
    second = build(SchedulerOutput, scheduled_new_reqs=[], scheduled_cached_reqs=cached,
                   num_scheduled_tokens={"a-1": 1, "b-2": 1}, total_num_scheduled_tokens=2,
                   scheduled_spec_decode_tokens={}, scheduled_encoder_inputs={}, finished_req_ids={"b-2"},
                   free_encoder_mm_hashes=[])
    tok = Tokens([0])
    batches[:] = [
        (first, {0: EngineCoreOutputs(outputs=[EngineCoreOutput(request_id="a-1", new_token_ids=tok),
                                               EngineCoreOutput(request_id="b-2", new_token_ids=tok)])}),
        (second, {0: EngineCoreOutputs(outputs=[EngineCoreOutput(request_id="a-1", new_token_ids=tok)])}),
    ]
    results = [b[1] for b in batches]

    cap = Capture()
    _state._sender = cap
    st = hook._attach(core)
    out["attached"] = bool(st)
    for res in results:
        so = sched.schedule(False)  # as EngineCore.step calls it
        got = sched.update_from_output(so, res)
        assert got is res
    out["steps"] = [{k: v for k, v in wire.decode(d).items()
                     if k in ("prefill", "decode", "scheduled_tokens", "request_ids", "request_tokens",
                              "running", "waiting", "degraded", "kv_usage")} for d in cap.datagrams]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
