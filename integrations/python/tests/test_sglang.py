# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The hook on the fake SGLang scheduler (tests/fakes/sglang), whose call
structure follows sgl-project/sglang: every datagram must describe one and
the same batch, as the scheduler's own bookkeeping recorded it, and only the
ranks that own a batch report it."""

import collections

from .helpers import HookTest, expected, made_of
import drive
import inferprof_hook
from inferprof_hook import _state, sglang as sglang_hook, wire


class SGLangTest(HookTest):
    def setUp(self):
        super().setUp()
        from sglang.srt.managers import schedule_batch, scheduler

        self.s = scheduler
        self.batch = schedule_batch
        self.assertIn("sglang.srt.managers.scheduler", inferprof_hook.patched())

    def by_engine(self):
        out = collections.defaultdict(list)
        for s in self.sender.steps():
            out[s["engine_index"]].append(s)
        return out

    def test_overlap_loop_reports_each_batch_with_its_own_tokens(self):
        truth = drive.sglang_scenario(step_ms=1)
        steps = self.sender.steps()
        self.assertEqual([made_of(s) for s in steps], expected(truth))
        self.assertTrue(all(s["scheduled_tokens"] for s in steps if s["prefill"]),
                        "prefill steps carry extend_num_tokens though process_batch_result gets a copy")
        self.assertTrue(any(s["preempted"] for s in steps), "retractions")
        self.assertTrue(any(s["resumed"] for s in steps))
        self.assertTrue(any(t > 1 for s in steps for t in s["request_tokens"]), "speculative tokens")
        for s in steps:
            self.assertEqual((s["engine"], s["engine_index"], s["degraded"]), (wire.ENGINE_SGLANG, 0, False))
            self.assertIsNotNone(s["kv_usage"])
        self.assertEqual([s["step"] for s in steps], list(range(1, len(steps) + 1)))

    def test_overlap_timing_does_not_double_count(self):
        drive.sglang_scenario(step_ms=5)
        steps = self.sender.steps()
        for prev, s in zip(steps, steps[1:]):
            # The overlap loop launches N before it processes N-1: N starts
            # when N-1's processing ended, not at its own launch.
            self.assertGreaterEqual(s["start_ns"], prev["end_ns"])
        self.assertGreaterEqual(steps[-1]["end_ns"] - steps[0]["start_ns"], len(steps) * 5_000_000)

    def test_delayed_sample_of_releases_that_read_cur_batch_from_self(self):
        """SGLang 0.5.3.post2 to 0.5.15.post1 define
        launch_batch_sample_if_needed(self, batch_result) and read
        self.cur_batch (hook_compat.py found the signature): the wrapper
        must call them with exactly what it got, and still find the batch."""
        calls = []

        def one_arg(self, batch_result):
            calls.append(batch_result)
            return batch_result

        wrapped = sglang_hook._wrap_sample(one_arg)
        sched = object.__new__(self.s.Scheduler)
        st = sglang_hook._Step(object(), [], 0)
        sched.__dict__[sglang_hook._ATTR] = st
        batch = object()
        launch = sglang_hook._Launch(batch, [], 0)
        st.launched.append(launch)
        sched.cur_batch = batch
        result = self.s.GenerationBatchResult(0, None)
        self.assertIs(wrapped(sched, result), result, "no delayed sample: passed through")
        result.delay_sample_func = lambda: result
        self.assertIs(wrapped(sched, result), result)
        self.assertEqual(calls, [result, result])
        self.assertEqual(len(launch.windows), 1, "the delayed sample is a launch window of self.cur_batch")

    def test_scheduler_unlike_the_table_gets_one_line_and_no_hook(self):
        """A Scheduler whose run_batch takes another first parameter than
        the table's (points.SGLANG): nothing is wrapped, one line says why."""
        import types

        class Scheduler:
            def run_batch(self, b):
                return b

            def process_batch_result(self, batch, result):
                return result

        mod = types.ModuleType("sglang_like")
        mod.Scheduler = Scheduler
        _state.reset()
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            self.assertEqual(sglang_hook.patch(mod), [])
        self.assertEqual(len(logs.records), 1)
        self.assertIn("engine step hook off for SGLang", logs.output[0])
        self.assertIn("Scheduler.run_batch(self, batch) (it takes (self, b))", logs.output[0])
        self.assertFalse(hasattr(Scheduler.run_batch, "_inferprof_wrapped"))

    def test_normal_loop(self):
        truth = drive.sglang_scenario(normal=True)
        self.assertEqual([made_of(s) for s in self.sender.steps()], expected(truth))

    def test_tensor_parallel_ranks_report_once(self):
        truth = drive.sglang_scenario(tp=4)
        got = self.by_engine()
        self.assertEqual(list(got), [0], "TP ranks 1..3 send nothing")
        self.assertEqual([made_of(s) for s in got[0]], expected(truth))

    def test_dp_attention_reports_per_attention_dp_group(self):
        truth = drive.sglang_scenario(tp=4, dp=2, dp_attention=True)
        got = self.by_engine()
        self.assertEqual(sorted(got), [0, 1], "engine index = attention-DP rank")
        for index in (0, 1):
            want = [t for t in truth if t["engine_index"] == index]
            self.assertEqual([made_of(s) for s in got[index]], expected(want), index)
            prefix = "g%d-" % index
            self.assertTrue(all(r.startswith(prefix) for s in got[index] for r in s["request_ids"]))

    def test_ranks_from_the_process_wide_parallel_context(self):
        """SGLang 0.5.21 to 0.5.23 keep no ranks on the scheduler: they are
        in sglang.srt.runtime_context.get_parallel(), a ParallelContext
        whose names not published raise RuntimeError (runtime_context.py
        of 0.5.23, read by hook_compat.py)."""
        import sys
        import types

        class ParallelContext:
            def __init__(self, **ranks):
                self._ranks = ranks

            def __getattr__(self, name):
                if name.startswith("_"):
                    raise AttributeError(name)
                if name in self._ranks:
                    return self._ranks[name]
                raise RuntimeError("parallel name %r has not been written in this process" % name)

        mod = types.ModuleType("sglang.srt.runtime_context")
        ctx = [None]
        mod.get_parallel = lambda: ctx[0]
        self.addCleanup(sys.modules.pop, mod.__name__, None)
        sys.modules[mod.__name__] = mod

        class Sched:
            server_args = None

        ranks = dict(attn_tp_rank=0, pp_rank=0, attn_cp_rank=0, attn_dp_rank=1, attn_dp_size=2)
        ctx[0] = ParallelContext(**ranks)
        self.assertEqual(sglang_hook._ranks(Sched()), (True, 1, []), "attention DP rank 1 reports as engine 1")
        ctx[0] = ParallelContext(**dict(ranks, attn_tp_rank=1))
        self.assertEqual(sglang_hook._ranks(Sched())[0], False, "attention TP rank 1 does not report")
        ctx[0] = ParallelContext()  # nothing published: as before, every rank reports, degraded
        reports, index, missing = sglang_hook._ranks(Sched())
        self.assertEqual((reports, index), (True, 0))
        self.assertIn("get_parallel()", missing[0])

    def test_only_rank_zero_of_attention_tp_cp_and_pp_reports(self):
        args = self.s.ServerArgs(tp_size=2)
        for kw in ({"tp_rank": 1}, {"pp_rank": 1}, {"attn_cp_rank": 1}):
            sched = self.s.Scheduler(args, arrivals={1: [self.s.Req("x", 4, 2)]}, **kw)
            sched.run_event_loop()
            self.assertTrue(sched.truth, kw)
        self.assertEqual(self.sender.steps(), [])

    def test_schedulers_before_parallel_state(self):
        """Older SGLang kept tp_rank and dp_rank on the scheduler."""

        class Old(self.s.Scheduler):
            def __init__(self, *a, tp_rank=0, dp_rank=None, **kw):
                super().__init__(*a, tp_rank=tp_rank, dp_rank=dp_rank, **kw)
                del self.ps
                self.tp_rank, self.dp_rank = tp_rank, dp_rank

        args = self.s.ServerArgs(tp_size=2)
        for tp in (0, 1):
            Old(args, tp_rank=tp, dp_rank=3, arrivals={1: [self.s.Req("x%d" % tp, 4, 2)]}).run_event_loop()
        steps = self.sender.steps()
        self.assertEqual({s["engine_index"] for s in steps}, {3})
        self.assertEqual({r for s in steps for r in s["request_ids"]}, {"x0"})

    def test_update_running_batch_without_a_batch(self):
        """SGLang of the forward-thread era (scheduler.py @0045f98e) calls
        self.update_running_batch() with no batch: it filters and retracts
        self.running_batch in place, puts the retracted requests back on
        waiting_queue and returns None. The wrapper must pass the call
        through and still report the retraction."""
        from guard import grow

        Req, ScheduleBatch = self.batch.Req, self.batch.ScheduleBatch

        class Old:
            def __init__(self, reqs):
                self.tp_rank = 0
                self.running_batch = ScheduleBatch(reqs)
                self.waiting_queue = []
                self.fits = len(reqs)

            def get_next_batch_to_run(self):
                self.update_running_batch()
                return self.running_batch

            def update_running_batch(self):
                batch = self.running_batch
                batch.filter_batch()
                if batch.is_empty():
                    self.running_batch = None
                    return
                if len(batch.reqs) > self.fits:  # check_decode_mem failed: retract_decode
                    retracted = batch.reqs[self.fits:]
                    batch.filter_batch(keep_indices=list(range(self.fits)))
                    self.waiting_queue.extend(retracted)
                batch.prepare_for_decode()

            def run_batch(self, batch):
                return None

            def process_batch_result(self, batch, result):
                for r in batch.reqs:
                    grow(r.output_ids, 1)

        class Module:
            Scheduler = Old

        self.assertIn("update_running_batch", sglang_hook.patch(Module))
        sched = Old([Req(r, 4, 100) for r in ("a", "b", "c")])
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            for fits in (3, 2):
                sched.fits = fits
                batch = sched.get_next_batch_to_run()
                sched.process_batch_result(batch, sched.run_batch(batch))
        self.assertFalse([m for m in logs.output if "hook failed" in m], logs.output)
        self.assertEqual([r.rid for r in sched.waiting_queue], ["c"])
        steps = self.sender.steps()
        self.assertEqual([(s["decode"], s["request_ids"], s["preempted"]) for s in steps],
                         [(3, ["a", "b", "c"], []), (2, ["a", "b"], ["c"])])

    def test_missing_extend_num_tokens_is_reported_degraded(self):
        orig = self.batch.ScheduleBatch.prepare_for_extend

        def old_prepare(b):
            orig(b)
            del b.extend_num_tokens

        self.batch.ScheduleBatch.prepare_for_extend = old_prepare
        try:
            with self.assertLogs("inferprof_hook", "WARNING") as logs:
                sched = self.s.Scheduler(self.s.ServerArgs(), arrivals={1: [self.s.Req("x", 4, 3)]})
                sched.run_event_loop()
        finally:
            self.batch.ScheduleBatch.prepare_for_extend = orig
        self.assertEqual(len(logs.records), 1)
        self.assertIn("extend_num_tokens", logs.output[0])
        steps = self.sender.steps()
        self.assertTrue(all(s["degraded"] for s in steps))
        self.assertEqual(steps[0]["scheduled_tokens"], 0)
        self.assertEqual(steps[0]["request_ids"], ["x"], "the rest of the step still holds")

    def test_idle_batches_send_nothing(self):
        sched = self.s.Scheduler(self.s.ServerArgs(tp_size=2, dp_size=2, enable_dp_attention=True),
                                 arrivals={4: [self.s.Req("late", 4, 2)]})
        sched.run_event_loop()
        steps = self.sender.steps()
        self.assertGreaterEqual(sched.forward_ct, len(sched.truth) + 3, "ran IDLE batches first")
        self.assertEqual(len(steps), len(sched.truth), "one datagram per batch that was not IDLE")
        self.assertTrue(all(s["scheduled_tokens"] for s in steps))
        self.assertEqual(steps[0]["request_ids"], ["late"])

    def test_hook_failures_never_reach_the_engine(self):
        sched = self.s.Scheduler(self.s.ServerArgs(), arrivals={1: [self.s.Req("x", 4, 3)]})
        sched.run_event_loop()  # attaches
        st = sched.__dict__["_inferprof_step"]
        st.emitter.sender = None
        sched.arrivals = {sched.iteration + 1: [self.s.Req("y", 4, 3)]}
        sched.gracefully_exit = False
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            sched.run_event_loop()
        self.assertIn(["y"], [t["request_ids"] for t in sched.truth], "the engine ran on")
        self.assertEqual(len(logs.records), 1)

    def test_missing_methods_warn_once(self):
        class Module:
            class Scheduler:
                pass

        _state.reset()
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            self.assertEqual(sglang_hook.patch(Module), [])
            self.assertEqual(sglang_hook.patch(Module), [])
        self.assertEqual(len(logs.records), 1)
        self.assertIn("engine step spans are off", logs.output[0])

    def test_patches_are_idempotent(self):
        self.assertEqual(sglang_hook.patch(self.s), ["run_batch", "process_batch_result", "update_running_batch",
                                                     "get_next_batch_to_run", "launch_batch_sample_if_needed"])
        self.assertFalse(getattr(self.s.Scheduler.run_batch.__wrapped__, "_inferprof_wrapped", False))

    def test_retracted_table_is_bounded_and_counted(self):
        old = sglang_hook.MAX_RETRACTED
        sglang_hook.MAX_RETRACTED = 1
        try:
            truth = drive.sglang_scenario(kv_tokens=50)
        finally:
            sglang_hook.MAX_RETRACTED = old
        steps = self.sender.steps()
        retracted = sum(len(t["preempted"]) for t in truth)
        self.assertGreaterEqual(retracted, 2, "the scenario retracts more than the bound")
        self.assertGreater(steps[-1]["hook_evicted_ids"], 0)
        self.assertEqual([s["preempted"] for s in steps], [sorted(t["preempted"]) for t in expected(truth)],
                         "retractions are still reported")
