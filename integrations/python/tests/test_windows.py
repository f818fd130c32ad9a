# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Launch windows: each step carries the intervals in which its own batch
was launched, on the fake engines whose call structure follows vLLM and
SGLang, with a fake GPU that records every launch as the CUPTI library's
callback would (tests/fakes/gpu.py). Every launch of a batch must lie in a
window of that batch's step, on its thread, and in no other step's."""

from .helpers import HookTest
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
        self.assertTrue(all(len(s["windows"]) == 2 for s in steps), "execute_model and sample_tokens")
        # The async shape: batch N+1 is launched inside step N's range.
        self.assertGreater(self.range_misses(steps, launches), 0)

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

    def test_sglang_consecutive_prefills_without_overlap(self):
        gpu = fake_gpu.GPU()
        truth = drive.sglang_scenario(gpu=gpu, no_prefill_overlap=True)
        self.check(truth, gpu)

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
