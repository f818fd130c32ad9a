# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Measures what the engine step hook adds to one engine step, with timeit.

  python3 integrations/python/tools/bench_hook.py [--repeat 2000]
  python3 integrations/python/tools/bench_hook.py --instructions   # needs valgrind

The step under test does no engine work: it calls scheduler.schedule() and
scheduler.update_from_output() on prebuilt SchedulerOutput and outputs shaped
like vLLM's (every request decoding one token), so the difference between
the wrapped and the bare step is the hook's cost per step: two clock reads,
reading the batch, encoding and sending one datagram. Times are CPU time of the engine process
(time.process_time: user and system, so the send system call counts), the
median of --repeat timeit runs of 8 steps each. The target is under 5 us per
step.

Collector modes:
  present  a receiver process that empties the socket every 2 ms without
           waiting on it, as the engine_step receiver does;
  absent   no socket: every datagram is dropped and counted.
Between runs, outside the timing, the bench waits until the receiver has
emptied the socket: the kernel queues only net.unix.max_dgram_qlen datagrams
(10 on a stock kernel), and a real engine steps every few milliseconds, not
every few microseconds. tools/bench_send.py measures the send by itself.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

import bench_send  # the polling receiver and the wait for it

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "fakes")]

STEPS_PER_RUN = 8  # under the stock 10-datagram socket queue

def make_engine(n):
    """An engine class whose step schedules a prebuilt n-request decode batch
    and hands prebuilt vLLM-shaped outputs to scheduler.update_from_output,
    the two calls the hook wraps."""
    from vllm.v1.core.sched.output import CachedRequestData, SchedulerOutput
    from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs

    ids = ["chatcmpl-%032x-%08x" % (i, i) for i in range(n)]
    cached = CachedRequestData(list(ids), set(), [100] * n, [5] * n)
    so = SchedulerOutput([], cached, {r: 1 for r in ids}, n, {}, set())
    outs = {0: EngineCoreOutputs([EngineCoreOutput(r, [0]) for r in ids])}

    class KV:
        usage = 0.42  # vLLM's usage is O(1) (free blocks / total)

    class Scheduler:
        running = ids
        waiting = ()
        kv_cache_manager = KV()

        def schedule(self):
            return so

        def update_from_output(self, scheduler_output, model_output):
            return outs

    class Engine:
        def __init__(self, hooked):
            self.scheduler = Scheduler()
            self.engine_index = 0
            if hooked:
                from inferprof_hook import vllm as vhook

                vhook._attach(self)
                em = self.__dict__["_inferprof_step"].emitter
                for i, r in enumerate(ids):  # the API ids, as preprocess_add_request records them
                    em.alias(r, "chatcmpl-%032x" % i)

        def preprocess_add_request(self, request):
            """Present, as on EngineCore (the ids above stand for what it records)."""

        def step(self):
            sched = self.scheduler
            return sched.update_from_output(sched.schedule(), None), True

    return Engine


def emptied(sender):
    """A timeit setup that waits until the receiver has read every datagram,
    then 100 us more, busy, so that the receiver is back asleep and this
    process's caches stay warm, as on an engine between two steps."""
    clock = time.perf_counter_ns

    def wait():
        if sender.sock is not None:
            bench_send.wait_read(sender.sock)
        end = clock() + 100_000
        while clock() < end:
            pass

    return wait


def per_step_us(fn, setup, repeat):
    runs = timeit.Timer(fn, setup=setup, timer=time.process_time).repeat(repeat=repeat, number=STEPS_PER_RUN)
    return statistics.median(runs) / STEPS_PER_RUN * 1e6


def loop(requests, steps, hooked):
    """Runs steps engine steps, collector absent; what --instructions counts."""
    os.environ["INFERPROF_STEP_ENDPOINT"] = "/nonexistent/inferprof-bench.sock"
    step = make_engine(requests)(hooked).step
    for _ in range(steps):
        step()


def instructions():
    """Instructions per step under valgrind, which unlike time does not move
    with the machine's load: (count at 12,000 steps - count at 2,000) / 10,000."""
    def count(requests, steps, hooked):
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             __file__, "--loop", str(steps), "--requests", str(requests)] + (["--hooked"] if hooked else []),
            capture_output=True, text=True, check=True).stderr
        return int(out.rsplit("Collected : ", 1)[1].split()[0])

    print("python %s; instructions per step (valgrind), collector absent" % sys.version.split()[0])
    print("%-10s %12s %12s %12s" % ("requests", "bare", "hooked", "hook"))
    for n in (1, 32, 256):
        per = [(count(n, 12000, h) - count(n, 2000, h)) // 10000 for h in (False, True)]
        print("%-10d %12d %12d %12d" % (n, per[0], per[1], per[1] - per[0]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=2000)
    p.add_argument("--instructions", action="store_true", help="count instructions with valgrind instead")
    p.add_argument("--loop", type=int, help=argparse.SUPPRESS)
    p.add_argument("--requests", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--hooked", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.loop is not None:
        return loop(args.requests, args.loop, args.hooked)
    if args.instructions:
        return instructions()
    d = tempfile.mkdtemp()
    path = os.path.join(d, "s.sock")
    os.environ["INFERPROF_STEP_ENDPOINT"] = path
    from inferprof_hook import _state

    print("python %s; hook CPU cost per step, median of %d runs x %d steps"
          % (sys.version.split()[0], args.repeat, STEPS_PER_RUN))
    print("%-10s %-10s %10s %10s %10s" % ("collector", "requests", "bare_us", "hooked_us", "hook_us"))
    for mode in ("present", "absent"):
        receiver = None
        if mode != "absent":
            receiver = subprocess.Popen([sys.executable, "-c", bench_send.RECEIVER, path, "0.002"],
                                        stdout=subprocess.PIPE, text=True)
            receiver.stdout.readline()
        try:
            for n in (1, 32, 256):
                _state.reset()
                Engine = make_engine(n)
                bare = Engine(False)
                hooked = Engine(True)
                hooked.step()  # check and connect outside the timing
                s = _state.sender()
                setup = emptied(s)
                b = per_step_us(bare.step, setup, args.repeat)
                h = per_step_us(hooked.step, setup, args.repeat)
                print("%-10s %-10d %10.2f %10.2f %10.2f" % (mode, n, b, h, h - b))
                if mode != "absent" and s.dropped:
                    print("  note: %d of %d datagrams dropped" % (s.dropped, s.sent + s.dropped))
        finally:
            if receiver is not None:
                receiver.kill()
                receiver.wait()
            if os.path.exists(path):
                os.unlink(path)
    os.rmdir(d)


if __name__ == "__main__":
    main()
