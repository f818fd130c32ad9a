# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Drives a fake engine with the hook loaded, for subprocess and e2e tests.

  python3 drive.py --engine vllm [--sync] [--tokens 6] [--step-ms 1] [--gpu] [--wait]
  python3 drive.py --engine sglang [--normal] [--tp 4] [--dp 2 --dp-attention] [--gpu]

Run it with PYTHONPATH=<repo>/integrations/python/bootstrap:<this folder> so
the hook arrives through sitecustomize, as under inferprof-run. It prints one
JSON object: "steps", what the hook must have reported, one entry per batch
the engine ran (in order per engine_index), taken from the fake engine's own
bookkeeping and left out where the batch scheduled nothing, produced nothing
and preempted nothing; and the hook's sent/dropped counts.

The vLLM scenario goes through the whole request path (the client assigns
f"{api_id}-{random8}" engine ids, the input thread preprocesses): requests
arrive while others run, one is chunked, one uses speculative decoding
(sync only, as in vLLM), one waits for remote KV (empty schedules), one is
aborted mid-decode, and the KV cache is small enough to preempt and resume.
The SGLang scenario runs every TP rank of a server with a small KV pool, so
decode batches retract requests that later resume.

With --gpu the engine launches its batches' work on a fake GPU
(tests/fakes/gpu.py) and the output adds "gpu": every launch and kernel,
tagged with the batch, as the CUPTI library would report them. With --wait
it reads one line from stdin before it starts (the end-to-end tests open
the fake CUPTI stream for this process first).
"""

import argparse
import json
import os
import signal
import sys


def vllm_scenario(sync=False, tokens=6, kv_tokens=60, step_ms=0.0, engine_index=0, hold=None, gpu=None,
                  tp=1, prep_ms=0.0, structured=False):
    """Runs the vLLM scenario; returns the truth per batch. hold, if set, is
    called with the engine after it is built. With tp > 1 the engine runs
    the multiprocess executor: tp worker processes, each with its own fake
    GPU, that spend prep_ms of CPU on each batch before they launch it.
    With structured, two requests use structured output, so under async
    scheduling their batches are sampled after the previous batch's update
    (the deferred branch of step_with_batch_queue)."""
    from vllm.v1.core.sched.scheduler import AsyncScheduler, Scheduler
    from vllm.v1.engine import core

    t = tokens
    sched = (Scheduler if sync else AsyncScheduler)(
        max_num_seqs=4, max_num_batched_tokens=40, kv_tokens=kv_tokens)
    executor = None
    if tp > 1:
        from vllm.v1.executor.multiproc_executor import MultiprocExecutor

        executor = MultiprocExecutor(sched, world_size=tp, prep_ms=prep_ms, scale=0.3)
    proc = core.EngineCoreProc(sched, step_time=step_ms / 1000.0, async_scheduling=not sync,
                               engine_index=engine_index, gpu=gpu, executor=executor)
    if hold is not None:
        hold(proc)
    client = core.Client(proc)
    events = {
        0: [("add", "cmpl-0", 12, t + 2, {}), ("add", "cmpl-1", 30, 3 * t, {}),
            ("add", "cmpl-2", 8, 2 * t, {"accept": [1, 3, 2]} if sync else {})],
        2: [("add", "cmpl-3", 10, 2 * t, {"structured": True} if structured else {})],
        3: [("add", "cmpl-4", 9, t, {"remote_kv_wait": 2})],
        5: [("abort", "cmpl-1")],
        7: [("add", "cmpl-5", 20, 2 * t, {"structured": True} if structured else {})],
    }
    late = ("add", "cmpl-6", 6, t, {"remote_kv_wait": 4})  # alone: empty schedules first
    i = 0
    try:
        while True:
            for ev in events.pop(i, ()):
                if ev[0] == "add":
                    client.add(ev[1], ev[2], ev[3], **ev[4])
                else:
                    client.abort(ev[1])
            client.sync()
            proc._process_input_queue()
            if not proc.has_work():
                if events:
                    i = min(events)
                    continue
                if late is None:
                    break
                client.add(late[1], late[2], late[3], **late[4])
                client.sync()
                late = None
                continue
            proc._process_engine_step()
            i += 1
    finally:
        proc.shutdown()
    return [dict(s, engine_index=engine_index) for s in sched.truth]


def sglang_scenario(normal=False, tokens=6, kv_tokens=50, step_ms=0.0, tp=1, dp=1, dp_attention=False,
                    scheduler_class=None, gpu=None, no_prefill_overlap=False, overlap_thread=False):
    """Runs the SGLang scenario on every rank; returns the truth per batch
    of the ranks that report (attention-TP rank 0)."""
    from sglang.srt.managers import scheduler as s

    server = s.ServerArgs(tp_size=tp, dp_size=dp, enable_dp_attention=dp_attention,
                          disable_overlap_schedule=normal, max_running_requests=4)
    t = tokens
    out = []
    for tp_rank, attn_dp_rank in s.ranks(server):
        # Every rank of an attention-DP group serves the same requests.
        # Under DP attention the second group's requests come later, so its
        # ranks run IDLE batches with their peers first.
        g = "g%d-" % attn_dp_rank if dp_attention else ""
        o = 2 * attn_dp_rank
        arrivals = {
            1 + o: [s.Req(g + "rid-0", 12, t + 2), s.Req(g + "rid-1", 9, 2 * t, accept=[2, 1]),
                    s.Req(g + "rid-2", 7, 2 * t)],
            3 + o: [s.Req(g + "rid-3", 10, t, grammar=True)],
            4 + o: [s.Req(g + "rid-4", 8, 2 * t)],
        }
        sched = (scheduler_class or s.Scheduler)(
            server, tp_rank=tp_rank, kv_tokens=kv_tokens, step_time=step_ms / 1000.0,
            arrivals=arrivals, dp_rank=0 if not dp_attention else None,
            gpu=gpu if tp_rank == 0 else None, disable_consecutive_prefill_overlap=no_prefill_overlap,
            overlap_thread=overlap_thread)
        sched.run_event_loop()
        if sched.ps.attn_tp_rank == 0:
            index = attn_dp_rank if dp_attention else 0
            out += [dict(st, engine_index=index) for st in sched.truth]
    return out


def reported(step):
    """Whether the hook sends a datagram for this batch."""
    return bool(step["scheduled_tokens"] or step["request_ids"] or step["preempted"])


def kill_after(n):
    """Test knob (INFERPROF_TEST_KILL_AFTER): SIGKILL this process right
    after the hook's n-th step, as a crashed engine."""
    from inferprof_hook import emitter

    emit = emitter.Emitter.emit
    done = [0]

    def emit_then_crash(em, *args, **kwargs):
        ok = emit(em, *args, **kwargs)
        done[0] += 1
        if done[0] >= n:
            os.kill(os.getpid(), signal.SIGKILL)
        return ok

    emitter.Emitter.emit = emit_then_crash


def main():
    if os.environ.get("INFERPROF_TEST_KILL_AFTER"):
        kill_after(int(os.environ["INFERPROF_TEST_KILL_AFTER"]))
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=["vllm", "sglang"], default="vllm")
    p.add_argument("--sync", action="store_true", help="vLLM: no batch queue (async scheduling off)")
    p.add_argument("--structured", action="store_true",
                   help="vLLM: two requests use structured output (deferred sampling)")
    p.add_argument("--normal", action="store_true", help="SGLang: event_loop_normal, not overlap")
    p.add_argument("--tokens", type=int, default=6, help="scales the requests' max tokens")
    p.add_argument("--kv-tokens", type=int, default=0, help="KV cache capacity in tokens")
    p.add_argument("--step-ms", type=float, default=0.0)
    p.add_argument("--engine-index", type=int, default=0)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--dp-attention", action="store_true")
    p.add_argument("--gpu", action="store_true", help="launch on a fake GPU and print its records")
    p.add_argument("--no-prefill-overlap", action="store_true",
                   help="SGLang: SGLANG_DISABLE_CONSECUTIVE_PREFILL_OVERLAP")
    p.add_argument("--overlap-thread", action="store_true",
                   help="SGLang with --gpu: the older overlap scheduler, forward on its own thread")
    p.add_argument("--wait", action="store_true",
                   help="print the processes that run kernels, then read a line from stdin before starting")
    p.add_argument("--prep-ms", type=float, default=0.0,
                   help="vLLM with --tp: CPU time a worker spends on a batch before it launches it")
    args = p.parse_args()
    if not args.kv_tokens:
        args.kv_tokens = 60 if args.engine == "vllm" else 50
    gpu = None
    if args.gpu:
        import gpu as fake_gpu

        gpu = fake_gpu.GPU()
    engines = []

    def ready(engine):
        """With --wait: tell the caller which processes will launch kernels."""
        engines.append(engine)
        if args.wait:
            ex = engine.model_executor
            print(json.dumps({"pid": os.getpid(), "workers": getattr(ex, "worker_pids", [])}), flush=True)
            sys.stdin.readline()

    if args.engine == "vllm":
        steps = vllm_scenario(args.sync, args.tokens, args.kv_tokens, args.step_ms, args.engine_index,
                              hold=ready, gpu=gpu, tp=args.tp, prep_ms=args.prep_ms, structured=args.structured)
    else:
        if args.wait:
            ready(type("Engine", (), {"model_executor": None})())
        steps = sglang_scenario(args.normal, args.tokens, args.kv_tokens, args.step_ms, args.tp, args.dp,
                                args.dp_attention, gpu=gpu, no_prefill_overlap=args.no_prefill_overlap,
                                overlap_thread=args.overlap_thread)
    import inferprof_hook
    from inferprof_hook import _state

    out = {"steps": [st for st in steps if reported(st)], "batches": len(steps),
           "stats": inferprof_hook.stats(), "pid": os.getpid(),
           "patched": inferprof_hook.patched(), "instance_id": _state.instance_id()}
    if gpu is not None:
        out["gpu"] = gpu.log()
    if engines and getattr(engines[0].model_executor, "logs", None):
        out["workers"] = engines[0].model_executor.logs
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
