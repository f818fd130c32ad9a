"""Drives a fake engine loop with the hook loaded, for subprocess and e2e tests.

  python3 drive.py --engine vllm --steps 20 [--step-ms 1] [--batch-queue]

Run it with PYTHONPATH=<repo>/integrations/python/bootstrap:<this folder> so
the hook arrives through sitecustomize, as under inferprof-run. It prints one
JSON object: the steps the hook must have reported (request ids under their
API ids, tokens each) computed from the engine's own outputs, and the hook's
sent/dropped counts.
"""

import argparse
import json
import sys


def _vllm(args):
    from vllm.v1.engine import core

    sched = core.Scheduler(max_running=4, preempt_at={5: "cmpl-1-internal"})
    # Enough work for every step: 6 requests of up to 4*steps tokens.
    for i in range(6):
        sched.add_request(core.Request(
            "cmpl-%d-internal" % i, prompt_len=16 + i, max_tokens=3 + i * args.steps,
            external_req_id="cmpl-%d" % i, accepted=[1, 3, 2] if i == 2 else None))
    ext = {rid: r.external_req_id for rid, r in sched.requests.items()}
    engine = core.EngineCoreProc(sched, step_time=args.step_ms / 1000.0,
                                 batch_queue_size=2 if args.batch_queue else 1)
    expected = []
    while len(expected) < args.steps:
        outputs, executed = engine.step_fn()
        if not outputs and not executed:
            break
        ids, toks = [], []
        for eco in (outputs or {}).values():
            for o in eco.outputs:
                if len(o.new_token_ids):
                    ids.append(ext[o.request_id])
                    toks.append(len(o.new_token_ids))
        expected.append({"request_ids": ids, "request_tokens": toks})
    return expected


def _sglang(args):
    from sglang.srt.managers import scheduler as s

    sched = s.Scheduler()
    for i in range(4):
        sched.add(s.Req("rid-%d" % i, 8 + i, max_new_tokens=2 + i * args.steps,
                        accepted=[2, 1] if i == 1 else None))
    expected = []
    orig = sched.process_batch_result

    def record(batch, result):
        before = [len(r.output_ids) for r in batch.reqs]
        orig(batch, result)
        ids, toks = [], []
        for r, b in zip(batch.reqs, before):
            if len(r.output_ids) > b:
                ids.append(r.rid)
                toks.append(len(r.output_ids) - b)
        expected.append({"request_ids": ids, "request_tokens": toks})

    # Record through the class method so the hook's wrapper runs inside.
    sched.process_batch_result = record
    sched.event_loop_normal(args.steps)
    return expected


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=["vllm", "sglang"], default="vllm")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--step-ms", type=float, default=0.0)
    p.add_argument("--batch-queue", action="store_true")
    args = p.parse_args()
    expected = _vllm(args) if args.engine == "vllm" else _sglang(args)
    import inferprof_hook

    import os

    json.dump({"steps": expected, "stats": inferprof_hook.stats(), "pid": os.getpid(),
               "patched": inferprof_hook.patched()}, sys.stdout)


if __name__ == "__main__":
    main()
