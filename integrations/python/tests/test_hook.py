"""Tests of the engine step hook against fake engines and a real Unix socket."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAKES = os.path.join(HERE, "fakes")
BOOTSTRAP = os.path.join(ROOT, "bootstrap")
for p in (ROOT, FAKES):
    if p not in sys.path:
        sys.path.insert(0, p)

import inferprof_hook  # noqa: E402
from inferprof_hook import _state, sglang as sglang_hook, vllm as vllm_hook, wire  # noqa: E402
from inferprof_hook.emitter import Emitter  # noqa: E402
from inferprof_hook.sender import Sender  # noqa: E402


class Collector:
    """A real Unix datagram socket standing in for the engine_step receiver."""

    def __init__(self, rcvbuf=None):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "step.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind(self.path)
        self.sock.setblocking(False)

    def drain(self):
        out = []
        while True:
            try:
                out.append(wire.decode(self.sock.recv(1 << 20)))
            except BlockingIOError:
                return out

    def read_while(self, fn):
        """Reads datagrams on a thread while fn runs, since a Unix datagram
        queue holds only net.unix.max_dgram_qlen (often 10) unread datagrams."""
        got, stop = [], threading.Event()
        self.sock.settimeout(0.05)

        def loop():
            while not stop.is_set():
                try:
                    got.append(wire.decode(self.sock.recv(1 << 20)))
                except (socket.timeout, BlockingIOError):
                    pass

        t = threading.Thread(target=loop)
        t.start()
        try:
            result = fn()
        finally:
            stop.set()
            t.join()
            self.sock.setblocking(False)
        return result, got + self.drain()

    def close(self):
        self.sock.close()
        self.dir.cleanup()


class HookTest(unittest.TestCase):
    def setUp(self):
        self.collector = Collector()
        self._env = dict(os.environ)
        os.environ[_state.ENV_ENDPOINT] = self.collector.path
        os.environ["OTEL_SERVICE_NAME"] = "svc-test"
        _state.reset()
        self.assertTrue(inferprof_hook.install())

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self._env)
        _state.reset()
        self.collector.close()


class WireTest(unittest.TestCase):
    def test_round_trip(self):
        ident = wire.identity("svc", "0.11.0", "host-a")
        entries = [wire.entry("a"), wire.entry("é" * 3, 300)]
        buf = wire.encode(wire.ENGINE_VLLM, 42, 1, 7, 1000, 2000, 1, 2, 17, 3, 4, 0.5, 9,
                          ident, entries, [wire.id_bytes("p")])
        d = wire.decode(buf)
        self.assertEqual(d["request_ids"], ["a", "ééé"])
        self.assertEqual(d["request_tokens"], [1, 300])
        self.assertEqual(d["preempted"], ["p"])
        self.assertEqual((d["pid"], d["engine_index"], d["step"], d["hook_dropped"]), (42, 1, 7, 9))
        self.assertEqual((d["start_ns"], d["end_ns"]), (1000, 2000))
        self.assertEqual((d["prefill"], d["decode"], d["scheduled_tokens"]), (1, 2, 17))
        self.assertEqual((d["running"], d["waiting"], d["kv_usage"]), (3, 4, 0.5))
        self.assertEqual((d["service_name"], d["engine_version"], d["host"]), ("svc", "0.11.0", "host-a"))

    def test_unknown_kv_usage_is_flagged_absent(self):
        buf = wire.encode(0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, 0, wire.identity("", "", ""), [], [])
        self.assertIsNone(wire.decode(buf)["kv_usage"])
        self.assertEqual(len(buf), wire.HEADER_SIZE + 3)

    def test_oversized_step_is_truncated_and_flagged(self):
        entries = [wire.entry("x" * 1000)] * 400
        buf = wire.encode(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, 0, wire.identity("", "", ""), entries, [])
        self.assertLessEqual(len(buf), wire.MAX_DATAGRAM)
        d = wire.decode(buf)
        self.assertTrue(d["flags"] & wire.FLAG_IDS_TRUNCATED)
        self.assertLess(len(d["request_ids"]), 400)

    def test_emitter_matches_reference_encoder(self):
        ident = wire.identity("svc", "1.0", "h")
        for kv, entries, pre in ((0.25, [wire.entry("a"), wire.entry("b", 4)], [wire.id_bytes("c")]),
                                 (None, [], []),
                                 (float("nan"), [], []),
                                 (None, [wire.entry("x" * 1000)] * 400, []),
                                 (0.5, [wire.entry("y" * 100)] * 2100, [wire.id_bytes("z")])):
            ref = wire.encode(wire.ENGINE_SGLANG, 42, 3, 9, 100, 200, 1, 2, 17, 3, 4, kv, 7, ident, entries, pre)
            self.assertEqual(_emitted(wire.ENGINE_SGLANG, 42, 3, 9, 100, 200, 1, 2, 17, 3, 4, kv,
                                      ident, entries, pre), ref)

    def test_kv_usage_is_clamped(self):
        ident = wire.identity("", "", "")
        for raw, want in ((1.0000001, 1.0), (-0.01, 0.0), (float("nan"), None)):
            for buf in (wire.encode(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, raw, 0, ident, [], []),
                        _emitted(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, raw, ident, [], [])):
                self.assertEqual(wire.decode(buf)["kv_usage"], want)

    def test_clock_stepping_back_never_makes_a_negative_step(self):
        ident = wire.identity("", "", "")
        for buf in (wire.encode(1, 1, 0, 1, 500, 400, 0, 0, 0, 0, 0, None, 0, ident, [], []),
                    _emitted(1, 1, 0, 1, 500, 400, 0, 0, 0, 0, 0, None, ident, [], [])):
            d = wire.decode(buf)
            self.assertEqual((d["start_ns"], d["end_ns"]), (500, 500))

    def test_decode_rejects_trailing_bytes(self):
        buf = wire.encode(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, 0, wire.identity("", "", ""), [], [])
        with self.assertRaises(ValueError):
            wire.decode(buf + b"x")


class _Capture:
    """A sender that keeps what it is given; dropped is reported as 7."""

    dropped = 7

    def __init__(self):
        self.sent = []

    def send(self, data):
        self.sent.append(data)
        return True


def _emitted(engine, pid, index, step, start, end, prefill, decode, scheduled, running,
             waiting, kv, ident, entries, pre):
    """The datagram the hook's Emitter sends for one step."""
    cap = _Capture()
    em = Emitter(engine, "x", "1.0", index, cap)
    em.pid, em.ident, em.step = pid, ident, step - 1
    em.pack = wire.head_struct(ident).pack
    em.room = wire.MAX_DATAGRAM - wire.HEADER_SIZE - len(ident)
    em.emit(start, end, prefill, decode, scheduled, running, waiting, kv, entries, pre)
    return cap.sent[0]


class SenderTest(unittest.TestCase):
    def test_absent_collector_drops_and_counts_without_raising(self):
        clock = [100.0]
        s = Sender(os.path.join(tempfile.gettempdir(), "inferprof-absent-%d.sock" % os.getpid()),
                   clock=lambda: clock[0])
        for _ in range(5):
            self.assertFalse(s.send(b"x"))
        self.assertEqual((s.sent, s.dropped), (0, 5))

    def test_reconnects_after_collector_appears(self):
        clock = [100.0]
        c = Collector()
        path = c.path
        c.sock.close()
        os.unlink(path)
        s = Sender(path, clock=lambda: clock[0])
        self.assertFalse(s.send(b"a"))
        c.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        c.sock.bind(path)
        c.sock.setblocking(False)
        self.assertFalse(s.send(b"b"), "retries only after the interval")
        clock[0] += 1.5
        self.assertTrue(s.send(b"c"))
        self.assertEqual(c.sock.recv(16), b"c")
        self.assertEqual((s.sent, s.dropped), (1, 2))
        s.close()
        c.close()

    def test_full_buffer_drops_and_keeps_socket(self):
        c = Collector(rcvbuf=4096)
        s = Sender(c.path)
        results = [s.send(b"y" * 1024) for _ in range(2000)]
        self.assertIn(False, results)
        self.assertGreater(s.dropped, 0)
        self.assertIsNotNone(s.sock, "a full buffer is not a lost collector")
        self.assertEqual(s.sent + s.dropped, 2000)
        while True:
            try:
                c.sock.recv(4096)
            except BlockingIOError:
                break
        self.assertTrue(s.send(b"z"))
        s.close()
        c.close()


class VLLMTest(HookTest):
    def setUp(self):
        super().setUp()
        from vllm.v1.engine import core

        self.core = core
        core.Guarded.reads = 0

    def engine(self, n=3, batch_queue=1, preempt_at=None, **kw):
        sched = self.core.Scheduler(max_running=4, preempt_at=preempt_at)
        for i in range(n):
            sched.add_request(self.core.Request("r%d-int" % i, prompt_len=10, max_tokens=3,
                                                external_req_id="r%d" % i, **kw))
        return self.core.EngineCore(sched, batch_queue_size=batch_queue)

    def test_patched_through_import_hook(self):
        self.assertIn("vllm.v1.engine.core", inferprof_hook.patched())
        self.assertTrue(self.core.EngineCore.step._inferprof_wrapped)
        self.assertTrue(self.core.EngineCore.step_with_batch_queue._inferprof_wrapped)
        self.assertEqual(vllm_hook.patch(self.core), ["step", "step_with_batch_queue"])
        self.assertFalse(getattr(self.core.EngineCore.step.__wrapped__, "_inferprof_wrapped", False),
                         "patching twice must not wrap twice")

    def test_one_datagram_per_step_with_batch_make_up(self):
        eng = self.engine()
        while True:
            out, executed = eng.step_fn()
            if not out and not executed:
                break
        steps = self.collector.drain()
        self.assertEqual(len(steps), 3)
        first = steps[0]
        self.assertEqual([s["step"] for s in steps], [1, 2, 3])
        self.assertEqual(first["request_ids"], ["r0", "r1", "r2"], "external ids, not engine ids")
        self.assertEqual(first["request_tokens"], [1, 1, 1])
        self.assertEqual((first["prefill"], first["decode"], first["scheduled_tokens"]), (3, 0, 30))
        self.assertEqual((steps[1]["prefill"], steps[1]["decode"], steps[1]["scheduled_tokens"]), (0, 3, 3))
        self.assertEqual(first["running"], 3)
        self.assertEqual(first["waiting"], 0)
        self.assertAlmostEqual(first["kv_usage"], 30 / 4096.0, places=6)
        self.assertEqual(steps[2]["running"], 0, "all finished after the third step")
        self.assertEqual(first["service_name"], "svc-test")
        self.assertEqual(first["engine"], wire.ENGINE_VLLM)
        self.assertEqual(first["pid"], os.getpid())
        self.assertEqual(first["host"], socket.gethostname())
        for s in steps:
            self.assertLessEqual(s["start_ns"], s["end_ns"])
        self.assertLessEqual(steps[0]["end_ns"], steps[1]["start_ns"])
        self.assertEqual(self.core.Guarded.reads, 0, "prompt or output token values were read")
        self.assertEqual(eng.scheduler.requests, {})
        self.assertEqual(eng.__dict__["_inferprof_step"].emitter.ids, {}, "finished ids are forgotten")

    def test_speculative_decoding_reports_tokens_per_request(self):
        eng = self.engine(n=1, accepted=[3, 2])
        eng.scheduler.requests["r0-int"].max_tokens = 6
        for _ in range(3):
            eng.step_fn()
        steps = self.collector.drain()
        self.assertEqual([s["request_tokens"] for s in steps], [[1], [3], [2]])
        self.assertEqual([s["decode"] for s in steps], [0, 1, 1])
        self.assertEqual([s["scheduled_tokens"] for s in steps], [10, 3, 2])

    def test_preempted_requests(self):
        eng = self.engine(n=2, preempt_at={2: "r1-int"})
        eng.step_fn()
        eng.step_fn()
        steps = self.collector.drain()
        self.assertEqual(steps[1]["preempted"], ["r1"])
        self.assertEqual(steps[1]["request_ids"], ["r0"])
        self.assertEqual(steps[1]["waiting"], 1)

    def test_batch_queue_variant(self):
        eng = self.engine(batch_queue=2)
        self.assertEqual(eng.step_fn.__name__, "step_with_batch_queue")
        eng.step_fn()  # schedules only
        eng.step_fn()  # returns the first batch's tokens
        steps = self.collector.drain()
        self.assertEqual(len(steps), 2)
        self.assertEqual(steps[0]["request_ids"], [])
        self.assertEqual(steps[0]["prefill"], 3)
        self.assertEqual(steps[1]["request_ids"], ["r0", "r1", "r2"])

    def test_idle_steps_send_nothing(self):
        eng = self.core.EngineCore(self.core.Scheduler())
        self.assertEqual(eng.step_fn(), ({}, False))
        self.assertEqual(self.collector.drain(), [])

    def test_engine_exceptions_propagate_unchanged(self):
        eng = self.engine()

        def boom(so):
            raise RuntimeError("model failed")

        eng.model_executor.execute_model = boom
        with self.assertRaisesRegex(RuntimeError, "model failed"):
            eng.step_fn()

    def test_hook_failures_never_reach_the_engine(self):
        eng = self.engine()
        eng.scheduler.kv_cache_manager = None
        eng.scheduler.update_from_output = lambda so, mo: {0: object()}  # no .outputs
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            out, executed = eng.step_fn()
            out2, _ = eng.step_fn()
        self.assertTrue(executed)
        self.assertEqual(len(logs.records), 1, "logged once, not per step")
        self.assertIn("hook failed in vllm step", logs.output[0])
        self.assertEqual(self.collector.drain(), [])

    def test_collector_absent_engine_keeps_running(self):
        self.collector.close()
        eng = self.engine()
        for _ in range(3):
            eng.step_fn()
        self.assertEqual(inferprof_hook.stats(), {"sent": 0, "dropped": 3})
        self.collector = Collector()

    def test_hook_dropped_count_travels_in_datagrams(self):
        eng = self.engine(n=1)
        _state.sender().dropped = 5
        eng.step_fn()
        self.assertEqual(self.collector.drain()[0]["hook_dropped"], 5)


class SGLangTest(HookTest):
    def setUp(self):
        super().setUp()
        from sglang.srt.managers import scheduler

        self.s = scheduler
        self.assertIn("sglang.srt.managers.scheduler", inferprof_hook.patched())

    def sched(self, **kw):
        sc = self.s.Scheduler(**kw)
        sc.add(self.s.Req("a", 8, 3))
        sc.add(self.s.Req("b", 4, 4, accepted=[2]))
        return sc

    def test_normal_loop(self):
        sc = self.sched(dp_rank=2)
        sc.event_loop_normal(10)
        steps = self.collector.drain()
        self.assertEqual(len(steps), 3)
        self.assertEqual(steps[0]["request_ids"], ["a", "b"])
        self.assertEqual(steps[0]["request_tokens"], [1, 1])
        self.assertEqual((steps[0]["prefill"], steps[0]["decode"], steps[0]["scheduled_tokens"]), (2, 0, 12))
        self.assertEqual(steps[1]["request_tokens"], [1, 2], "speculative tokens counted")
        self.assertEqual((steps[1]["prefill"], steps[1]["decode"]), (0, 2))
        self.assertEqual(steps[0]["engine"], wire.ENGINE_SGLANG)
        self.assertEqual(steps[0]["engine_index"], 2)
        self.assertIsNotNone(steps[0]["kv_usage"])
        self.assertEqual(self.s.Guarded.reads, 0)

    def test_overlap_loop_pairs_launch_and_result(self):
        sc = self.sched()
        sc.event_loop_overlap(20)
        steps = self.collector.drain()
        self.assertGreaterEqual(len(steps), 3)
        self.assertEqual(sum(sum(s["request_tokens"]) for s in steps), 7)
        for s in steps:
            self.assertLessEqual(s["start_ns"], s["end_ns"])

    def test_only_tp_rank_zero_reports(self):
        self.sched(tp_rank=1).event_loop_normal(10)
        self.assertEqual(self.collector.drain(), [])

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


class VersionWarningTest(unittest.TestCase):
    def test_vllm_without_v1_step_warns_once(self):
        class Module:
            pass

        _state.reset()
        with self.assertLogs("inferprof_hook", "WARNING") as logs:
            self.assertEqual(vllm_hook.patch(Module), [])
            self.assertEqual(vllm_hook.patch(Module), [])
        self.assertEqual(len(logs.records), 1)


def _run(args, env_extra, cwd=ROOT):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(env_extra)
    return subprocess.run([sys.executable] + args, env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


class SitecustomizeTest(unittest.TestCase):
    """The hook arrives through sitecustomize in a fresh interpreter, as under inferprof-run."""

    def test_fresh_interpreter_sends_every_step(self):
        c = Collector()
        try:
            r, got = c.read_while(lambda: _run(
                [os.path.join(FAKES, "drive.py"), "--steps", "40", "--step-ms", "2"],
                {"PYTHONPATH": BOOTSTRAP + os.pathsep + FAKES, _state.ENV_ENDPOINT: c.path}))
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["stats"]["sent"] + out["stats"]["dropped"], 40)
            self.assertEqual(len(got), out["stats"]["sent"])
            # A datagram dropped under load is missing, never garbled.
            want = {i + 1: st for i, st in enumerate(out["steps"])}
            for s in got:
                self.assertEqual({"request_ids": s["request_ids"], "request_tokens": s["request_tokens"]},
                                 want[s["step"]])
            self.assertGreater(len(got), 0)
            self.assertTrue(any(s["preempted"] for s in got))
        finally:
            c.close()

    def test_disable_variable(self):
        c = Collector()
        try:
            r = _run([os.path.join(FAKES, "drive.py"), "--steps", "3"],
                     {"PYTHONPATH": BOOTSTRAP + os.pathsep + FAKES, _state.ENV_ENDPOINT: c.path,
                      _state.ENV_DISABLED: "1"})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["patched"], [])
            self.assertEqual(c.drain(), [])
        finally:
            c.close()

    def test_shadowed_sitecustomize_still_runs(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("import builtins\nbuiltins.OTHER_SITECUSTOMIZE = True\n")
            r = _run(["-c", "import builtins, sys; print(getattr(builtins, 'OTHER_SITECUSTOMIZE', False),"
                            " 'inferprof_hook' in sys.modules)"],
                     {"PYTHONPATH": BOOTSTRAP + os.pathsep + d})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), ["True", "True"])


if __name__ == "__main__":
    unittest.main()
