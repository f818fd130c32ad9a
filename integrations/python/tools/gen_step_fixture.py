# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Writes Python-encoded step datagrams for the Go decoder's tests.

  python3 integrations/python/tools/gen_step_fixture.py internal/stepwire/testdata

It runs the real hook on the fake vLLM and SGLang engines (the scenarios of
tests/fakes/drive.py), keeps the bytes the hook hands its socket, and writes
a few interesting datagrams as <name>.bin next to <name>.json, the values
Python's decoder reads from them. The Go test decodes the .bin files and
compares with the .json, so encoder and decoder cannot drift. Older wire
versions live in testdata/v<N>/ and are never regenerated: they are what
older hooks sent.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "fakes")]


class Capture:
    sent = dropped = 0

    def __init__(self):
        self.datagrams = []

    def send(self, data):
        self.datagrams.append(bytes(data))
        self.sent += 1
        return True

    def close(self):
        pass


def main(out):
    os.environ["OTEL_SERVICE_NAME"] = "fixture-svc"
    import inferprof_hook
    from inferprof_hook import _state, wire

    import drive

    inferprof_hook.install()

    def run(fn):
        _state.reset()
        cap = _state._sender = Capture()
        fn()
        return [(b, wire.decode(b)) for b in cap.datagrams]

    def first(steps, pred):
        return next(b for b, d in steps if pred(d))

    got = {}
    va = run(lambda: drive.vllm_scenario(engine_index=1))
    got["vllm_async_prefill"] = first(va, lambda d: d["prefill"] >= 2)
    got["vllm_preempt"] = first(va, lambda d: d["preempted"])
    got["vllm_resumed"] = first(va, lambda d: d["resumed"])
    vs = run(lambda: drive.vllm_scenario(sync=True))
    got["vllm_spec"] = first(vs, lambda d: max(d["request_tokens"] or [0]) > 1)
    sg = run(lambda: drive.sglang_scenario())
    got["sglang_prefill"] = first(sg, lambda d: d["prefill"])
    got["sglang_retract"] = first(sg, lambda d: d["preempted"])

    from sglang.srt.managers import schedule_batch, scheduler

    orig = schedule_batch.ScheduleBatch.prepare_for_extend

    def old_prepare(b):  # an SGLang without extend_num_tokens
        orig(b)
        del b.extend_num_tokens

    schedule_batch.ScheduleBatch.prepare_for_extend = old_prepare
    try:
        dg = run(lambda: scheduler.Scheduler(scheduler.ServerArgs(),
                                             arrivals={1: [scheduler.Req("old-1", 5, 2)]}).run_event_loop())
    finally:
        schedule_batch.ScheduleBatch.prepare_for_extend = orig
    got["sglang_degraded"] = first(dg, lambda d: d["degraded"])

    for name, buf in got.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(buf)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(wire.decode(buf), f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        print("wrote", name, len(buf), "bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
