# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Launch windows: each step carries the intervals in which its own batch
was launched, on the fake engines whose call structure follows vLLM and
SGLang, with a fake GPU that records every launch as the CUPTI library's
callback would (tests/fakes/gpu.py). Every launch of a batch must lie in a
window of that batch's step, on its thread, and in no other step's."""

import json
import os
import subprocess
import sys
import unittest

from .helpers import BOOTSTRAP, FAKES, Collector, HookTest, decode_any
import drive
import gpu as fake_gpu
from inferprof_hook import wire


def inside(launch, windows):
    return any(a <= launch["time"] <= b and t == launch["thread"] for a, b, t in windows)


class LaunchWindowTest(HookTest):
    def check(self, truth, gpu):
        steps = self.sender.steps()
        reported = [t for t in truth if drive.reported(t)]
        self.assertEqual(len(steps), len(reported))
        launches = gpu.log()["launches"]
        self.assertTrue(launches)
        batches = {s["batch"] for s in steps}
        for s, t in zip(steps, reported):
            self.assertEqual(s["batch"], t["batch"], "the hook numbers batches as the engine does")
            self.assertTrue(s["windows"], s)
            for lc in launches:
                if lc["batch"] == t["batch"]:
                    self.assertTrue(inside(lc, s["windows"]), (lc, s["windows"]))
                else:
                    self.assertFalse(inside(lc, s["windows"]), (lc, t["batch"], s["windows"]))
        self.assertTrue(all(lc["batch"] in batches for lc in launches), "every launch has its step")
        return steps, launches

    def range_misses(self, steps, launches):
        """How many launches the step's time range gives to another batch:
        what attribution by the range alone gets wrong."""
        wrong = 0
        for s in steps:
            for lc in launches:
                if s["start_ns"] <= lc["time"] <= s["end_ns"] and lc["batch"] != s["batch"]:
                    wrong += 1
        return wrong

    def test_vllm_async_scheduling(self):
        gpu = fake_gpu.GPU()
        truth = drive.vllm_scenario(gpu=gpu)
        steps, launches = self.check(truth, gpu)
        self.assertTrue(any(lc["graph"] for lc in launches), "decode batches replay a CUDA graph")
        # From its schedule() to the next schedule() or update, and after an
        # update while it is the newest batch (deferred sampling).
        self.assertTrue(all(1 <= len(s["windows"]) <= 3 for s in steps), [s["windows"] for s in steps])
        # The async shape: batch N+1 is launched inside step N's range.
        self.assertGreater(self.range_misses(steps, launches), 0)

    def test_vllm_deferred_structured_sampling(self):
        """A structured-output batch is executed when scheduled but sampled
        after the previous batch's update: its sample_tokens launches come
        after that step ended, and still count for its own step."""
        gpu = fake_gpu.GPU()
        engines = []
        truth = drive.vllm_scenario(gpu=gpu, structured=True, hold=engines.append)
        self.assertGreater(engines[0].deferred_samples, 0, "some batches were sampled late")
        steps, launches = self.check(truth, gpu)
        late = [lc for lc in launches
                if any(s["end_ns"] < lc["time"] and s["batch"] < lc["batch"] for s in steps
                       if s["batch"] == lc["batch"] - 1)]
        self.assertTrue(late, "launches after the previous batch's update")

    def test_vllm_sync_scheduling(self):
        gpu = fake_gpu.GPU()
        truth = drive.vllm_scenario(sync=True, gpu=gpu)
        steps, launches = self.check(truth, gpu)
        self.assertEqual(self.range_misses(steps, launches), 0, "step() launches within its own range")

    def test_sglang_overlap_loop(self):
        gpu = fake_gpu.GPU()
        truth = drive.sglang_scenario(gpu=gpu)
        steps, launches = self.check(truth, gpu)
        self.assertTrue(any(len(s["windows"]) == 4 for s in steps),
                        "preparation, run_batch, delayed sampling, result processing")
        self.assertGreater(self.range_misses(steps, launches), 0)

    def test_sglang_forward_thread(self):
        """Older SGLang: the forward of batch N runs on TpModelWorkerClient's
        thread while the scheduler thread prepares N+1."""
        from sglang.srt.managers import tp_worker_overlap_thread as t

        self.assertTrue(getattr(t.Queue, "_inferprof_wrapped", False))
        gpu = fake_gpu.GPU()
        truth = drive.sglang_scenario(gpu=gpu, overlap_thread=True)
        steps, launches = self.check(truth, gpu)
        self.assertEqual(len({lc["thread"] for lc in launches}), 2, "scheduler and forward thread")
        windows = [(w, s["batch"]) for s in steps for w in s["windows"]]
        self.assertEqual(len({w[2] for w, _ in windows}), 2)
        overlapping = [(a, b) for a, ba in windows for b, bb in windows
                       if ba != bb and a[2] != b[2] and a[0] < b[1] and b[0] < a[1]]
        self.assertTrue(overlapping, "one batch's forward runs while the next is prepared")

    def test_sglang_forward_window_closing_while_the_step_is_sent(self):
        """The forward thread's get() takes its open window out of _open,
        then reads the clock to end it; the GIL can pass to the scheduler
        thread in between, which then sends the batch with that window's
        end still None. Run that interleaving exactly: the clock read that
        ends the window sends the step first."""
        import queue
        import time as time_mod

        from inferprof_hook import sglang as hook

        launch = type("Launch", (), {"windows": []})()
        sent = []
        real = time_mod.time_ns
        closing = [False]

        def time_ns():
            if closing[0]:
                closing[0] = False
                self.assertFalse(hook._open, "the window is out of _open, its end not set")
                sent.append(hook._flat_windows(launch.windows, 1234))
            return real()

        time_mod.time_ns = time_ns
        try:
            q = hook._timed_queue(queue.Queue)()
        finally:
            time_mod.time_ns = real
        item = (object(), 0)
        saved = dict(hook._queued), dict(hook._open)
        try:
            hook._queued.clear()
            hook._open.clear()
            hook._queued[id(item[0])] = launch
            q.put(item)
            q.get()  # opens the batch's window on this thread
            self.assertEqual(len(launch.windows), 1)
            q.put((None, None))
            closing[0] = True
            q.get()  # closes it: the step is sent at the clock read
        finally:
            hook._queued.clear()
            hook._queued.update(saved[0])
            hook._open.clear()
            hook._open.update(saved[1])
        self.assertEqual(len(sent), 1)
        start, end, _ = sent[0]
        self.assertEqual(end, max(1234, start), "an open window ends when the step is sent")

    def test_sglang_consecutive_prefills_without_overlap(self):
        """SGLANG_DISABLE_CONSECUTIVE_PREFILL_OVERLAP: the previous prefill is
        processed between the next one's preparation and its launch."""
        from sglang.srt.managers import scheduler as s

        gpu = fake_gpu.GPU()
        sched = s.Scheduler(s.ServerArgs(max_running_requests=8), gpu=gpu, kv_tokens=400,
                            disable_consecutive_prefill_overlap=True,
                            arrivals={1: [s.Req("a", 12, 3)], 2: [s.Req("b", 9, 3)], 3: [s.Req("c", 7, 3)]})
        disabled = []
        orig = sched.is_disable_overlap_for_batch
        sched.is_disable_overlap_for_batch = lambda b, last_batch: disabled.append(orig(b, last_batch)) or disabled[-1]
        sched.run_event_loop()
        self.assertGreaterEqual(disabled.count(True), 2, "consecutive prefills happened")
        self.check(sched.truth, gpu)

    def test_sglang_normal_loop(self):
        gpu = fake_gpu.GPU()
        truth = drive.sglang_scenario(normal=True, gpu=gpu)
        self.check(truth, gpu)

    def test_windows_can_be_turned_off(self):
        import os

        os.environ["INFERPROF_LAUNCH_WINDOWS"] = "0"
        from vllm.v1.engine import core

        eng = core.EngineCore(async_scheduling=True)  # attached after the variable was set
        self.assertNotIn("execute_model", eng.model_executor.__dict__)
        gpu = fake_gpu.GPU()
        drive.vllm_scenario(gpu=gpu)
        steps = self.sender.steps()
        self.assertTrue(steps)
        self.assertEqual({(s["batch"], len(s["windows"])) for s in steps}, {(0, 0)})
        self.assertEqual(steps[0]["version"], wire.VERSION)


class WorkerMarkTest(unittest.TestCase):
    """vLLM's multiprocess executor: the hook in each worker process sends a
    launch mark per batch, numbered as the engine numbers its
    batches; each worker's launches lie in its marks of their batch."""

    def test_workers_mark_their_batches(self):
        c = Collector(decode=decode_any)
        env = dict(os.environ, PYTHONPATH=BOOTSTRAP + os.pathsep + FAKES, INFERPROF_STEP_ENDPOINT=c.path)
        try:
            # Workers spend 3 ms preparing each batch: the GPU outruns them.
            r, got = c.read_while(lambda: subprocess.run(
                [sys.executable, os.path.join(FAKES, "drive.py"), "--engine", "vllm", "--tp", "2",
                 "--prep-ms", "3"], env=env, capture_output=True, text=True, timeout=120))
            got += c.drain()
        finally:
            c.close()
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        steps = [g for g in got if "final" not in g]
        marks = [g for g in got if "final" in g]
        self.assertEqual(len(steps), len(out["steps"]))
        self.assertEqual([s["batch"] for s in steps], [t["batch"] for t in out["steps"]])
        engine_misses = 0
        for w in out["workers"]:
            mine = [m for m in marks if m["pid"] == w["pid"]]
            self.assertEqual(mine[0]["batch"], 0, "a hello first")
            self.assertTrue(all(m["ppid"] == out["pid"] for m in mine), "the engine is the parent")
            by_batch = {}
            for m in mine[1:]:
                by_batch.setdefault(m["batch"], []).append(m)
            self.assertEqual(sorted(by_batch), list(range(1, out["batches"] + 1)), "every batch, in order")
            for b, ms in by_batch.items():
                self.assertTrue(ms[-1]["final"], (b, ms))
                self.assertFalse(any(m["final"] for m in ms[:-1]))
            for lc in w["gpu"]["launches"]:
                ms = by_batch[lc["batch"]]
                self.assertTrue(any(m["start_ns"] <= lc["time"] <= m["end_ns"] and m["thread_id"] == lc["thread"]
                                    for m in ms), lc)
                others = [m for b, ms in by_batch.items() if b != lc["batch"] for m in ms]
                self.assertFalse(any(m["start_ns"] <= lc["time"] <= m["end_ns"] for m in others), lc)
                step = next(s for s in steps if s["batch"] == lc["batch"])
                if not any(a <= lc["time"] <= e for a, e, _ in step["windows"]):
                    engine_misses += 1
        # What the engine process sees of a batch (enqueueing its calls) does
        # not hold the workers' launches of it.
        self.assertGreater(engine_misses, 0)
