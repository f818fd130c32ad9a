# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The SGLang engines of tools/bench_hook.py (tools/bench_sglang.py) drive
the hook as SGLang's loops do: the hooked scheduler reports one step per
batch it processed, each a decode of every request with one token, with the
launch windows of its loop, so the bench's figure is the cost of what it
says; the bare scheduler does the same engine work without the hook."""

import os
import sys

from .helpers import ROOT, CaptureSender, HookTest
from inferprof_hook import _state

sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_hook  # noqa: E402
import bench_sglang  # noqa: E402

WRAPPED = ("get_next_batch_to_run", "update_running_batch", "run_batch", "process_batch_result")

# Launch windows per step: get_next_batch_to_run, run_batch and
# process_batch_result; the forward-thread era adds the forward thread's
# iteration (launch_batch_sample_if_needed opens none: nothing is delayed).
WINDOWS = {"sglang-overlap": 3, "sglang-normal": 3, "sglang-thread": 4}


class BenchSGLangTest(HookTest):
    def test_each_loop_reports_every_batch_it_processes(self):
        runs = 7
        for loop in bench_sglang.LOOPS:
            for n in (1, 3):
                with self.subTest(loop=loop, requests=n):
                    _state.reset()
                    self.sender = _state._sender = CaptureSender()
                    make = bench_sglang.make_scheduler(n, loop)
                    bare, hooked = make(False), make(True)
                    for name in WRAPPED:
                        self.assertTrue(getattr(getattr(type(hooked), name), "_inferprof_wrapped", False), name)
                        self.assertFalse(getattr(getattr(type(bare), name), "_inferprof_wrapped", False), name)
                    old = loop == "sglang-thread"
                    logs = self.assertLogs if old else self.assertNoLogs
                    with logs("inferprof_hook", "WARNING") as caught:
                        for _ in range(runs):
                            bare.step()
                            hooked.step()
                    if old:
                        # The forward-thread era names its KV pool
                        # token_to_kv_pool, which the hook does not read.
                        self.assertEqual(len(caught.output), 1)
                        self.assertIn("token_to_kv_pool_allocator", caught.output[0])
                    steps = self.sender.steps()
                    # The overlap loops process batch N in the step that launches N+1.
                    processed = runs - 1 if loop != "sglang-normal" else runs
                    self.assertEqual(len(steps), processed)
                    self.assertEqual(hooked.__dict__["_inferprof_step"].emitter.step, processed)
                    self.assertEqual([s["batch"] for s in steps], list(range(1, processed + 1)))
                    self.assertEqual(len(hooked.reqs[0].output_ids), processed)
                    self.assertEqual(len(bare.reqs[0].output_ids), processed, "the bare loop does the same work")
                    self.assertNotIn("_inferprof_step", bare.__dict__)
                    ids = steps[0]["request_ids"]
                    self.assertEqual(len(set(ids)), n)
                    for s in steps:
                        self.assertEqual((s["prefill"], s["decode"], s["scheduled_tokens"]), (0, n, n))
                        self.assertEqual((s["request_ids"], s["request_tokens"]), (ids, [1] * n))
                        self.assertEqual(len(s["windows"]), WINDOWS[loop], s["windows"])
                        self.assertLessEqual(s["start_ns"], s["end_ns"])
                        self.assertEqual(s["degraded"], old)
                        self.assertEqual(s["kv_usage"] is None, old)
                    hooked.between()
                    self.assertEqual(len(hooked.reqs[0].output_ids), 0)

    def test_engine_names(self):
        self.assertEqual(bench_hook.engines("all"), list(bench_hook.ENGINES))
        self.assertEqual(bench_hook.engines("sglang"), list(bench_sglang.LOOPS))
        self.assertEqual(bench_hook.engines("vllm,sglang-normal,vllm"), ["vllm", "sglang-normal"])
        with self.assertRaises(SystemExit):
            bench_hook.engines("tgi")
