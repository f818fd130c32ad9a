# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The hook on the fake vLLM v1 engine (tests/fakes/vllm), whose call
structure follows vllm-project/vllm: every datagram must describe one and
the same batch, as the engine's own bookkeeping recorded it."""

import dataclasses
import os
import re

from .helpers import HookTest, expected, made_of
import drive
import inferprof_hook
from inferprof_hook import _state, emitter, vllm as vllm_hook, wire


class VLLMTest(HookTest):
    def setUp(self):
        super().setUp()
        from vllm.v1.engine import core
        from vllm.v1.core.sched import scheduler

        self.core = core
        self.sched = scheduler

    def run_scenario(self, **kw):
        engines = []
        truth = drive.vllm_scenario(hold=engines.append, **kw)
        return engines[0], truth, self.sender.steps()

    def test_patched_through_import_hook(self):
        self.assertIn("vllm.v1.engine.core", inferprof_hook.patched())
        self.assertTrue(self.core.EngineCore.__init__._inferprof_wrapped)
        self.assertTrue(self.core.EngineCore.preprocess_add_request._inferprof_wrapped)
        self.assertEqual(vllm_hook.patch(self.core), ["__init__", "preprocess_add_request"])
        self.assertFalse(getattr(self.core.EngineCore.__init__.__wrapped__, "_inferprof_wrapped", False),
                         "patching twice must not wrap twice")

    def test_async_scheduling_reports_each_batch_with_its_own_tokens(self):
        eng, truth, steps = self.run_scenario(step_ms=2)
        self.assertEqual(eng.step_fn.__name__, "step_with_batch_queue")
        self.assertEqual([made_of(s) for s in steps], expected(truth))
        self.assertEqual([s["step"] for s in steps], list(range(1, len(steps) + 1)),
                         "no gaps: skipped empty schedules do not take a step number")
        # The scenario covers what the pairing must survive.
        self.assertTrue(any(s["preempted"] for s in steps))
        self.assertTrue(any(s["resumed"] for s in steps))
        self.assertTrue(any(s["prefill"] and s["decode"] for s in steps), "mixed prefill and decode")
        self.assertLess(len(steps), len(truth), "empty schedules (remote KV) are not reported")
        for s in steps:
            self.assertEqual(s["engine"], wire.ENGINE_VLLM)
            self.assertEqual((s["pid"], s["service_name"], s["degraded"]), (os.getpid(), "svc-test", False))

    def test_batch_queue_returns_the_previous_batch(self):
        """step_with_batch_queue schedules N+1 before it returns N."""
        sched = self.sched.AsyncScheduler(max_num_batched_tokens=64)
        eng = self.core.EngineCore(sched, async_scheduling=True)
        client = _InProc(eng)
        client.add("a", 10, 5)
        client.add("b", 20, 5)
        out, executed = eng.step_fn()  # schedules batch 1 (both prefills), returns nothing
        self.assertEqual((out, executed), (None, True))
        self.assertEqual(self.sender.steps(), [])
        client.add("c", 7, 5)
        out, _ = eng.step_fn()  # schedules batch 2 (decodes + c), returns batch 1
        steps = self.sender.steps()
        self.assertEqual(len(steps), 1)
        first = steps[0]
        self.assertEqual((first["prefill"], first["decode"], first["scheduled_tokens"]), (2, 0, 30),
                         "batch 1's make-up, not batch 2's")
        self.assertEqual(sorted(first["request_ids"]), ["a", "b"])
        eng.step_fn()  # returns batch 2
        second = self.sender.steps()[1]
        self.assertEqual((second["prefill"], second["decode"], second["scheduled_tokens"]), (1, 2, 9))
        self.assertEqual(second["request_ids"], ["a", "b", "c"])
        self.assertGreaterEqual(second["start_ns"], first["end_ns"], "steps do not overlap")

    def test_sync_scheduling_with_speculative_decoding(self):
        eng, truth, steps = self.run_scenario(sync=True)
        self.assertEqual(eng.step_fn.__name__, "step")
        self.assertEqual([made_of(s) for s in steps], expected(truth))
        self.assertTrue(any(t > 1 for s in steps for t in s["request_tokens"]), "drafts accepted")
        self.assertTrue(any(s["scheduled_tokens"] > s["prefill"] + s["decode"] for s in steps
                            if not s["prefill"]), "drafts scheduled")

    def test_steps_are_timed_from_scheduling_to_update(self):
        _, _, steps = self.run_scenario(step_ms=5)
        for prev, s in zip(steps, steps[1:]):
            self.assertGreaterEqual(s["start_ns"], prev["end_ns"], "a step starts after the previous update")
        for s in steps:
            self.assertGreater(s["end_ns"], s["start_ns"])
        # Every batch held the fake GPU for 5 ms, one after the other, and
        # the steps cover that time without overlapping.
        self.assertGreaterEqual(steps[-1]["end_ns"] - steps[0]["start_ns"], len(steps) * 5_000_000)

    def test_request_ids_are_the_api_ids_and_leave_with_finished_req_ids(self):
        eng, truth, steps = self.run_scenario()
        internal = re.compile(r"^cmpl-\d-[0-9a-f]{8}$")
        ids = {i for s in steps for i in s["request_ids"] + s["preempted"] + s["resumed"]}
        self.assertEqual(ids, {"cmpl-%d" % i for i in range(7)})
        self.assertTrue(all(internal.match(r) for r in eng.scheduler.external), "engine ids are suffixed")
        st = eng.__dict__["_inferprof_step"]
        self.assertEqual(st.emitter.ids, {}, "every id, the aborted one too, left the table")
        self.assertEqual(st.preempted, {})
        self.assertEqual(st.emitter.evicted, 0)

    def test_aborted_request_leaves_the_table_when_the_scheduler_says_so(self):
        eng = self.core.EngineCore(self.sched.Scheduler())
        client = _InProc(eng)
        client.add("keep", 4, 50)
        client.add("gone", 4, 50)
        for _ in range(3):
            eng.step_fn()
        em = eng.__dict__["_inferprof_step"].emitter
        gone = client.ids["gone"]
        self.assertIn(gone, em.ids)
        eng.aborts_queue.put([gone])
        eng.step_fn()  # abort lands before update_from_output
        self.assertIn(gone, em.ids, "still listed until a SchedulerOutput says it finished")
        eng.step_fn()
        self.assertNotIn(gone, em.ids)
        self.assertIn(client.ids["keep"], em.ids, "live requests keep their ids")
        self.assertNotIn("gone", self.sender.steps()[-1]["request_ids"])

    def test_id_table_is_bounded_and_counts_evictions(self):
        old = emitter.MAX_CACHED_IDS
        emitter.MAX_CACHED_IDS = 2
        try:
            eng = self.core.EngineCore(self.sched.Scheduler())
            client = _InProc(eng)
            for i in range(4):
                client.add("r%d" % i, 4, 50)
            eng.step_fn()
        finally:
            emitter.MAX_CACHED_IDS = old
        em = eng.__dict__["_inferprof_step"].emitter
        s = self.sender.steps()[0]
        self.assertLessEqual(len(em.ids), 2)
        self.assertGreaterEqual(em.evicted, 2)
        self.assertEqual(s["hook_evicted_ids"], em.evicted, "the count travels in the datagram")
        self.assertEqual(len(s["request_ids"]), 4)
        self.assertTrue(any("-" in r for r in s["request_ids"]),
                        "evicted requests fall back to engine ids, visibly")

    def test_older_vllm_is_reported_degraded_once(self):
        """A SchedulerOutput without preempted_req_ids, and a
        CachedRequestData with resumed_from_preemption flags instead of
        resumed_req_ids and no num_output_tokens (vLLM 0.10): checked once
        at attach, one warning, the steps marked degraded."""
        from vllm.v1.core.sched import output

        @dataclasses.dataclass
        class CachedRequestData:
            req_ids: list
            resumed_from_preemption: list
            num_computed_tokens: list

        @dataclasses.dataclass
        class SchedulerOutput:
            scheduled_new_reqs: list
            scheduled_cached_reqs: CachedRequestData
            num_scheduled_tokens: dict
            total_num_scheduled_tokens: int
            scheduled_spec_decode_tokens: dict
            finished_req_ids: set

        def older(so):
            c = so.scheduled_cached_reqs
            old = SchedulerOutput(so.scheduled_new_reqs, CachedRequestData(
                c.req_ids, [r in c.resumed_req_ids for r in c.req_ids], c.num_computed_tokens),
                so.num_scheduled_tokens, so.total_num_scheduled_tokens, so.scheduled_spec_decode_tokens,
                so.finished_req_ids)
            old.__dict__["_so"] = so
            return old

        class OldScheduler(self.sched.Scheduler):
            def schedule(self, *a):
                return older(super().schedule(*a))

            def update_from_output(self, scheduler_output, model_runner_output):
                return super().update_from_output(scheduler_output.__dict__["_so"], model_runner_output)

        self.patch_module(output, SchedulerOutput=SchedulerOutput, CachedRequestData=CachedRequestData)
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            eng = self.core.EngineCore(OldScheduler())
            client = _InProc(eng)
            client.add("a", 6, 3)
            for _ in range(4):
                eng.step_fn()
        self.assertEqual(len(logs.records), 1, logs.output)
        for what in ("SchedulerOutput.preempted_req_ids", "CachedRequestData.num_output_tokens"):
            self.assertIn(what, logs.output[0])
        # resumed_from_preemption still says who resumed: not missing.
        self.assertNotIn("finished_req_ids", logs.output[0])
        self.assertNotIn("resumed", logs.output[0])
        self.assertIn("checked against", logs.output[0])
        steps = self.sender.steps()
        self.assertTrue(all(s["degraded"] for s in steps))
        self.assertEqual([(s["prefill"], s["decode"]) for s in steps], [(1, 0), (0, 1), (0, 1)],
                         "the split still holds where it can be inferred")

    def test_vllm_lacking_a_required_point_gets_one_line_and_no_hook(self):
        """vLLM 0.8's reading of SchedulerOutput: scheduled_cached_reqs is a
        list of one CachedRequestData per request (req_id, no req_ids). The
        attach-time check names what is missing in one line, and the hook
        stays off: no step is sent, the engine runs as unhooked."""
        from vllm.v1.core.sched import output

        @dataclasses.dataclass
        class CachedRequestData:
            req_id: str
            resumed_from_preemption: bool
            num_computed_tokens: int

        self.patch_module(output, CachedRequestData=CachedRequestData)
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            eng = self.core.EngineCore(self.sched.Scheduler())
            client = _InProc(eng)
            client.add("a", 6, 3)
            outs = [eng.step_fn()[0] for _ in range(4)]
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("engine step hook off for vLLM", logs.output[0])
        self.assertIn("CachedRequestData.req_ids", logs.output[0])
        self.assertNotIn("Traceback", logs.output[0])
        self.assertIs(eng.__dict__[vllm_hook._ATTR], False)
        self.assertNotIn("update_from_output", eng.scheduler.__dict__, "the scheduler is not wrapped")
        self.assertEqual(self.sender.steps(), [])
        self.assertEqual(sum(len(e.outputs) for o in outs if o for e in o.values()), 3,
                         "the engine produced its tokens")

    def test_unexpected_error_in_a_step_turns_the_hook_off_in_one_line(self):
        """The stand-in of issue 25: a SchedulerOutput that passes the
        attach-time check but whose scheduled_cached_reqs is a list at run
        time. The first step's error is one line with no traceback, the
        hook gives the scheduler its methods back, and the engine's outputs
        are intact on every step."""
        class ListScheduler(self.sched.Scheduler):
            def schedule(self, *a):
                so = super().schedule(*a)
                self.last = so
                return so

            def update_from_output(self, scheduler_output, model_runner_output):
                return super().update_from_output(scheduler_output, model_runner_output)

        sched = ListScheduler()
        eng = self.core.EngineCore(sched)
        client = _InProc(eng)
        client.add("a", 6, 5)
        client.add("b", 4, 5)
        real = sched.schedule  # the hook's wrapper

        def listed(*a):
            so = real(*a)
            so.scheduled_cached_reqs = [so.scheduled_cached_reqs]  # an older reading
            return so

        sched.__dict__["schedule"] = listed
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            outs = [eng.step_fn()[0] for _ in range(6)]
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertRegex(logs.output[0], r"engine step hook off for vLLM .* after an unexpected error in "
                                         r"vllm step: AttributeError: .*req_ids.* at vllm\.py:\d+")
        self.assertNotIn("Traceback", logs.output[0])
        self.assertIsNone(logs.records[0].exc_info)
        self.assertNotIn("update_from_output", sched.__dict__, "the scheduler's own method is back")
        self.assertIs(eng.__dict__[vllm_hook._ATTR], False)
        self.assertEqual(sum(len(e.outputs) for o in outs if o for e in o.values()), 10,
                         "every token reached the engine's output")

    def test_engine_exceptions_propagate_unchanged(self):
        eng = self.core.EngineCore(self.sched.Scheduler())
        _InProc(eng).add("a", 4, 4)
        eng.model_executor.fail = RuntimeError("model failed")
        with self.assertRaisesRegex(RuntimeError, "model failed"):
            eng.step_fn()

    def test_hook_failures_never_reach_the_engine(self):
        eng = self.core.EngineCore(self.sched.Scheduler())
        _InProc(eng).add("a", 4, 4)
        st = eng.__dict__["_inferprof_step"]
        st.emitter.sender = None  # every step's send fails
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            out, executed = eng.step_fn()
            out2, _ = eng.step_fn()
        self.assertTrue(executed)
        self.assertEqual(sum(len(e.outputs) for e in out.values()), 1, "the engine's outputs are intact")
        self.assertEqual(sum(len(e.outputs) for e in out2.values()), 1)
        self.assertEqual(len(logs.records), 1, "one line, not one per step")
        self.assertIn("hook off for vLLM", logs.output[0])
        self.assertEqual(self.sender.steps(), [])

    def test_worker_error_turns_its_marks_off_in_one_line(self):
        """An executor worker's call whose scheduler output lacks what the
        mark reads: one line, and the wrapper's own methods come back."""
        import types

        class Wrapper:  # WorkerWrapperBase's two calls
            def execute_model(self, scheduler_output):
                return None  # sample_tokens follows

            def sample_tokens(self, grammar_output=None):
                return "sampled"

        w = Wrapper()
        vllm_hook._attach_worker(w)
        self.assertIn("execute_model", w.__dict__)
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            self.assertIsNone(w.execute_model(types.SimpleNamespace()))  # no total_num_scheduled_tokens
            self.assertIsNone(w.execute_model(types.SimpleNamespace()))
            self.assertEqual(w.sample_tokens(), "sampled")
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("hook off for vLLM executor worker", logs.output[0])
        self.assertIn("AttributeError", logs.output[0])
        self.assertEqual(set(w.__dict__), set(), "the wrapper's own methods are back")

    def test_collector_absent_engine_keeps_running(self):
        _state.reset()
        os.environ[_state.ENV_ENDPOINT] = "/nonexistent/inferprof.sock"
        eng = self.core.EngineCore(self.sched.Scheduler())
        _InProc(eng).add("a", 4, 3)
        for _ in range(3):
            eng.step_fn()
        self.assertEqual(inferprof_hook.stats(), {"sent": 0, "dropped": 3, "rings": 0})

    def test_hook_dropped_count_travels_in_datagrams(self):
        eng = self.core.EngineCore(self.sched.Scheduler())
        _InProc(eng).add("a", 4, 3)
        eng.__dict__[vllm_hook._ATTR].emitter.dropped = 5
        eng.step_fn()
        self.assertEqual(self.sender.steps()[0]["hook_dropped"], 5)

    def test_vllm_without_v1_engine_warns_once(self):
        class Module:
            pass

        _state.reset()
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            self.assertEqual(vllm_hook.patch(Module), [])
            self.assertEqual(vllm_hook.patch(Module), [])
        self.assertEqual(len(logs.records), 1)


class _InProc:
    """The in-process client path: assign ids, preprocess, add."""

    def __init__(self, eng):
        self.eng = eng
        self.ids = {}

    def add(self, rid, prompt_len, max_tokens, **knobs):
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.engine.input_processor import InputProcessor

        req = EngineCoreRequest(rid, prompt_len, max_tokens, **knobs)
        InputProcessor.assign_request_id(req)
        self.ids[rid] = req.request_id
        self.eng.add_request(*self.eng.preprocess_add_request(req))
