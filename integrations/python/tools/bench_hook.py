"""Measures what the engine step hook adds to one engine step, with timeit.

  python3 integrations/python/tools/bench_hook.py [--number 20000]

Times are CPU time of the engine process (time.process_time, user and
system), best of 5. The step under test does no engine work: it calls scheduler.schedule() and
returns prebuilt outputs shaped like vLLM's (every request decoding one
token), so the difference between the wrapped and the bare step is the
hook's cost per step: two clock reads, reading the batch, encoding and
sending one datagram. It runs with a collector present (a separate process
draining the socket, as the receiver does) and absent (datagrams dropped),
for 1, 32 and 256 requests per step. The target is under 5 us per step.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "fakes")]

DRAIN = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(sys.argv[1])
print("ready", flush=True)
while True:
    s.recv(1 << 20)
"""


def make_engine(core, n):
    """An engine whose step returns a prebuilt n-request decode batch."""
    sched = core.Scheduler(max_running=n)
    for i in range(n):
        r = core.Request("chatcmpl-%032x-%d" % (i, i), prompt_len=100, max_tokens=1 << 30,
                         external_req_id="chatcmpl-%032x" % i)
        sched.requests[r.request_id] = r
        r.num_computed_tokens = 100
        sched.running.append(r)
    so = core.SchedulerOutput()
    for r in sched.running:
        so.num_scheduled_tokens[r.request_id] = 1
    so.total_num_scheduled_tokens = n
    outs = {0: core.EngineCoreOutputs([core.EngineCoreOutput(r.request_id, [0]) for r in sched.running])}
    sched.schedule = lambda: so

    class KV:
        usage = 0.42  # vLLM's usage is O(1) (free blocks / total); the fake's is not

    sched.kv_cache_manager = KV()

    class Engine:
        def __init__(self):
            self.scheduler = sched

        def step(self):
            self.scheduler.schedule()
            return outs, True

    return Engine


def per_step_us(fn, number, repeat=5):
    # CPU time of this process (user + system, so the send syscall counts),
    # not wall time: on a shared machine wall time mostly measures the
    # neighbours.
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--number", type=int, default=20000)
    args = p.parse_args()
    d = tempfile.mkdtemp()
    path = os.path.join(d, "s.sock")
    os.environ["INFERPROF_STEP_ENDPOINT"] = path
    from inferprof_hook import _state, vllm as vhook
    from vllm.v1.engine import core

    print("python %s; per-step CPU cost of the hook, best of 5 x %d steps" % (sys.version.split()[0], args.number))
    print("%-10s %-10s %10s %10s %10s" % ("collector", "requests", "bare_us", "hooked_us", "hook_us"))
    for present in (True, False):
        drain = None
        if present:
            drain = subprocess.Popen([sys.executable, "-c", DRAIN, path], stdout=subprocess.PIPE, text=True)
            drain.stdout.readline()
        try:
            for n in (1, 32, 256):
                _state.reset()
                Engine = make_engine(core, n)
                bare = Engine()
                Hooked = type("Hooked", (Engine,), {"step": vhook._wrap(Engine.step)})
                hooked = Hooked()
                hooked.step()  # attach outside the timing
                b = per_step_us(bare.step, args.number)
                h = per_step_us(hooked.step, args.number)
                print("%-10s %-10d %10.2f %10.2f %10.2f" % ("present" if present else "absent", n, b, h, h - b))
                s = _state.sender()
                if present and s.dropped > s.sent // 100:
                    print("  note: %d of %d datagrams dropped (drain process too slow)" % (s.dropped, s.sent + s.dropped))
        finally:
            if drain is not None:
                drain.kill()
                drain.wait()
    os.unlink(path) if os.path.exists(path) else None
    os.rmdir(d)


if __name__ == "__main__":
    main()
