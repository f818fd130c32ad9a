# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Measures what the engine step hook adds to one engine step, with timeit.

  python3 integrations/python/tools/bench_hook.py [--repeat 2000] [--engine vllm|sglang|all]
  python3 integrations/python/tools/bench_hook.py --instructions   # needs valgrind

The step under test does no engine work. vLLM's calls scheduler.schedule(),
model_executor.execute_model(), model_executor.sample_tokens() and
scheduler.update_from_output() on prebuilt SchedulerOutput and outputs
shaped like vLLM's (every request decoding one token), in EngineCore.step's
order. SGLang's (bench_sglang.py) runs one iteration of the scheduler's
loops, event_loop_overlap (sglang-overlap, the default), event_loop_normal
(sglang-normal) and the forward-thread era's overlap loop (sglang-thread),
calling get_next_batch_to_run, update_running_batch, run_batch,
process_batch_result and launch_batch_sample_if_needed in their order on a
running batch of the fakes' ScheduleBatch and Req, every request decoding
one token. The difference between the wrapped and the bare step is the
hook's cost per step: the clock reads, the batch's launch windows, reading
the batch, encoding the step and handing it over. Times are CPU time
of the engine process (time.process_time: user and system, so a send
counts), the median of --repeat timeit runs of 8 steps each, with the 10th
and 90th percentile of the runs as the spread. The targets (issue 16): at
most 3 us per step at 1 request and 20 us at 256, with a collector present.

Collector modes:
  ring      the hook writes to a shared-memory ring, which the bench process
            itself drains between runs (ring.Reader, the receiver's protocol);
  ring-2ms  the same ring, drained by a reader process every 2 ms, as the
            engine_step receiver does: on a small shared machine the reader
            runs on the engine's core, and what its context switches cost
            the next step shows here;
  datagram  INFERPROF_STEP_RING_BYTES=0: one datagram per step to a reader
            process that empties its socket every 2 ms (the fallback);
  absent    no socket: no ring can be set up, every datagram is dropped and
            counted.
Between runs, outside the timing, the bench waits until the reader has read
everything, then 100 us more: the kernel queues only net.unix.max_dgram_qlen
datagrams (10 on a stock kernel), and a real engine steps every few
milliseconds, not every few microseconds. tools/bench_send.py measures a
send by itself.

With ring mode and vLLM, a last line measures an executor worker of vLLM's
multiprocess executor: per batch, its execute_model and sample_tokens calls
and the two launch marks the hook writes for them into the worker's ring.
"""

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

import bench_send  # the wait for a datagram reader
import bench_sglang

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "fakes")]

STEPS_PER_RUN = 8  # under the stock 10-datagram socket queue
MODES = ("ring", "ring-2ms", "datagram", "absent")
ENGINES = ("vllm",) + bench_sglang.LOOPS
# --engine takes these names, or a comma-separated list of ENGINES.
GROUPS = {"all": ENGINES, "sglang": bench_sglang.LOOPS}

# A reader process: rings and datagrams, every 2 ms, as the receiver polls.
READER = """
import sys, time
sys.path.insert(0, sys.argv[2])
from inferprof_hook import ring
r = ring.Reader(sys.argv[1], len)
print("ready", flush=True)
while True:
    time.sleep(0.002)
    r.poll()
"""

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

    class Executor:
        """The executor calls EngineCore.step makes; the hook times them."""

        def execute_model(self, scheduler_output, non_block=False):
            return None  # sample_tokens follows, as with async scheduling

        def sample_tokens(self, grammar_output, non_block=False):
            return None

    class Engine:
        def __init__(self, hooked):
            self.scheduler = Scheduler()
            self.model_executor = Executor()
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
            ex = self.model_executor
            so = sched.schedule()
            ex.execute_model(so, non_block=True)
            ex.sample_tokens(None)
            return sched.update_from_output(so, None), True

    return Engine


def engine_factory(engine, n):
    """make(hooked): an engine object whose step() is one engine step with
    n requests decoding, hooked or bare."""
    if engine == "vllm":
        return make_engine(n)
    return bench_sglang.make_scheduler(n, engine)


def emitter_of(engine):
    """The hook's emitter of a hooked engine object, once it has stepped."""
    return engine.__dict__["_inferprof_step"].emitter


def engines(names):
    out = []
    for name in names.split(","):
        for e in GROUPS.get(name, (name,)):
            if e not in ENGINES:
                raise SystemExit("unknown engine %r (%s, or %s)" % (e, ", ".join(ENGINES), ", ".join(GROUPS)))
            if e not in out:
                out.append(e)
    return out


def make_worker(hooked):
    """One batch in a vLLM executor worker process: the execute_model and
    sample_tokens calls its busy loop makes on the WorkerWrapperBase, each
    of which the hook marks (a launch mark into the worker's ring)."""
    class SchedulerOutput:
        total_num_scheduled_tokens = 1

    so = SchedulerOutput()

    class Wrapper:
        def execute_model(self, scheduler_output):
            return None  # sample_tokens follows

        def sample_tokens(self, grammar_output):
            return None

    w = Wrapper()
    if hooked:
        from inferprof_hook import vllm as vhook

        vhook._attach_worker(w)

    def batch():
        w.execute_model(so)
        w.sample_tokens(None)

    return batch


def emptied(emitter, reader=None, between=None):
    """A timeit setup that waits until the reader has read everything the
    hook handed over (or reads it, given the bench's own reader), then
    100 us more, busy, so that the reader is back asleep and this process's
    caches stay warm, as on an engine between two steps. between, if set,
    runs first (the SGLang engines trim their requests' output lists)."""
    from inferprof_hook.ring import W_READ

    clock = time.perf_counter_ns
    sender = emitter.sender if emitter is not None else None

    def wait():
        if between is not None:
            between()
        r = emitter.ring if emitter is not None else None
        if reader is not None:
            reader.poll()
        elif r is not None:
            while r.q[W_READ] != r.w:
                pass
        elif sender is not None and sender.sock is not None:
            bench_send.wait_read(sender.sock)
        end = clock() + 100_000
        while clock() < end:
            pass

    return wait


def runs_us(fn, setup, repeat):
    """Per-step CPU time of each run, sorted."""
    runs = timeit.Timer(fn, setup=setup, timer=time.process_time).repeat(repeat=repeat, number=STEPS_PER_RUN)
    return sorted(r / STEPS_PER_RUN * 1e6 for r in runs)


def loop(engine_name, requests, steps, hooked, mode):
    """Runs steps engine steps; what --instructions counts. In ring mode the
    loop itself plays the reader after each step (consumes the record and
    beats, two stores), in the bare loop too, so the difference is the
    hook's. The datagram mode has no reader: every send is refused (no
    socket), which is the absent collector."""
    from inferprof_hook import ring

    d = tempfile.mkdtemp()
    path = os.path.join(d, "s.sock")
    os.environ["INFERPROF_STEP_ENDPOINT"] = path if mode == "ring" else "/nonexistent/inferprof-bench.sock"
    reader = ring.Reader(path) if mode == "ring" else None
    engine = engine_factory(engine_name, requests)(hooked)
    step = engine.step
    step()
    step()  # SGLang's overlap loop processes its first batch in the second step
    q = memoryview(bytearray(160)).cast("Q")
    r = None
    if hooked and reader is not None:
        em = emitter_of(engine)
        reader.poll()
        r = em.ring
        assert r is not None and reader.rings, "the ring was not set up"
        q = r.q
    W_READ, W_BEAT = ring.W_READ, ring.W_BEAT
    for i in range(steps):
        step()
        q[W_READ] = r.w if r is not None else i
        q[W_BEAT] = i
    if reader is not None:
        reader.close()


def instructions(names, sizes):
    """Instructions per step under valgrind, which unlike time does not move
    with the machine's load: (count at 6,000 steps - count at 1,000) / 5,000.
    valgrind runs memcpy a byte at a time, so the copies (a 256-request
    record is 12 KB) count for far more here than they cost."""
    def count(engine, requests, steps, hooked, mode):
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             __file__, "--loop", str(steps), "--requests", str(requests), "--mode", mode, "--engine", engine]
            + (["--hooked"] if hooked else []),
            capture_output=True, text=True, check=True).stderr
        return int(out.rsplit("Collected : ", 1)[1].split()[0])

    print("python %s; instructions per step (valgrind)" % sys.version.split()[0])
    print("%-14s %-10s %-10s %12s %12s %12s" % ("engine", "collector", "requests", "bare", "hooked", "hook"))
    for engine in names:
        for mode, label in (("ring", "ring"), ("absent", "absent")):
            for n in sizes:
                per = [(count(engine, n, 6000, h, mode) - count(engine, n, 1000, h, mode)) // 5000
                       for h in (False, True)]
                print("%-14s %-10s %-10d %12d %12d %12d" % (engine, label, n, per[0], per[1], per[1] - per[0]))


def row(engine, mode, n, b, h, dropped=""):
    """One line of the table: the bare median, the hooked median, their
    difference, and the hooked runs' p10 and p90 less the bare median."""
    lo, hi = h[len(h) // 10] - b, h[len(h) * 9 // 10] - b
    print("%-14s %-10s %-9s %8.2f %9.2f %8.2f %8.2f - %6.2f %8s" % (
        engine, mode, n, b, statistics.median(h), statistics.median(h) - b, lo, hi, dropped))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=2000)
    p.add_argument("--modes", default=",".join(MODES), help="collector modes to run (%s)" % ", ".join(MODES))
    p.add_argument("--engine", default="all",
                   help="engines to run: vllm, sglang (its three loops), all, or a comma-separated list of %s"
                   % ", ".join(ENGINES))
    p.add_argument("--sizes", default="1,32,256", help="requests per step, comma-separated")
    p.add_argument("--instructions", action="store_true", help="count instructions with valgrind instead")
    p.add_argument("--loop", type=int, help=argparse.SUPPRESS)
    p.add_argument("--requests", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--mode", default="ring", help=argparse.SUPPRESS)
    p.add_argument("--hooked", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    names = engines(args.engine)
    sizes = [int(x) for x in args.sizes.split(",")]
    # The forward-thread era's SGLang lacks the KV attributes the hook
    # reads; bench_sglang.py says so, and its one warning per row is noise.
    logging.getLogger("inferprof_hook").addFilter(lambda r: "degraded=true" not in r.getMessage())
    if args.loop is not None:
        return loop(names[0], args.requests, args.loop, args.hooked, args.mode)
    if args.instructions:
        return instructions(names, sizes)
    d = tempfile.mkdtemp()
    path = os.path.join(d, "s.sock")
    os.environ["INFERPROF_STEP_ENDPOINT"] = path
    from inferprof_hook import _state

    print("python %s; hook CPU cost per step, median [p10-p90] of %d runs x %d steps; load average %s"
          % (sys.version.split()[0], args.repeat, STEPS_PER_RUN,
             " ".join("%.1f" % x for x in os.getloadavg())))
    print("%-14s %-10s %-9s %8s %9s %8s %17s %8s" % ("engine", "collector", "requests", "bare_us", "hooked_us",
                                                     "hook_us", "hook p10-p90", "dropped"))
    from inferprof_hook import ring

    for mode in args.modes.split(","):
        os.environ["INFERPROF_STEP_RING_BYTES"] = "" if mode.startswith("ring") else "0"
        reader = own = None
        if mode == "ring":
            own = ring.Reader(path, len)
        elif mode != "absent":
            reader = subprocess.Popen([sys.executable, "-c", READER, path, ROOT],
                                      stdout=subprocess.PIPE, text=True)
            reader.stdout.readline()
        try:
            for engine in names:
                for n in sizes:
                    _state.reset()
                    make = engine_factory(engine, n)
                    bare, hooked = make(False), make(True)
                    # Check, connect and set the ring up outside the timing;
                    # SGLang's overlap loops process their first batch in
                    # the second step.
                    for e in (bare, hooked, bare, hooked):
                        e.step()
                    em = emitter_of(hooked)
                    if own is not None:
                        own.poll()
                    if mode.startswith("ring") and em.ring is None:
                        raise SystemExit("%s mode: the hook set up no ring" % mode)
                    b = statistics.median(runs_us(bare.step, emptied(em, own, getattr(bare, "between", None)),
                                                  args.repeat))
                    h = runs_us(hooked.step, emptied(em, own, getattr(hooked, "between", None)), args.repeat)
                    row(engine, mode, n, b, h, em.dropped)
        finally:
            if own is not None:
                own.close()
            if reader is not None:
                reader.kill()
                reader.wait()
            if os.path.exists(path):
                os.unlink(path)
    if "ring" in args.modes.split(",") and "vllm" in names:
        # The launch marks of an executor worker, per batch, with the bench
        # process draining the worker's ring as in ring mode.
        _state.reset()
        own = ring.Reader(path, len)
        try:
            bare, hooked = make_worker(False), make_worker(True)
            hooked()
            own.poll()
            setup = emptied(None, own)
            b = statistics.median(runs_us(bare, setup, args.repeat))
            row("vllm", "worker", "batch", b, runs_us(hooked, setup, args.repeat))
        finally:
            own.close()
            if os.path.exists(path):
                os.unlink(path)
    print("load average after: %s" % " ".join("%.1f" % x for x in os.getloadavg()))
    os.rmdir(d)


if __name__ == "__main__":
    main()
