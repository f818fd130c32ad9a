# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Tests of the wire encoder and the sender, against a real Unix socket."""

import os
import socket
import tempfile
import unittest

from .helpers import ROOT, Collector
from inferprof_hook import wire
from inferprof_hook.emitter import Emitter
from inferprof_hook.sender import Sender


class WireTest(unittest.TestCase):
    def test_round_trip(self):
        ident = wire.identity("svc", "0.11.0", "host-a", "4f1c-instance")
        entries = [wire.entry("a"), wire.entry("é" * 3, 300)]
        buf = wire.encode(wire.ENGINE_VLLM, 42, 1, 7, 1000, 2000, 1, 2, 17, 3, 4, 0.5, 9,
                          ident, entries, [wire.id_bytes("p")], [wire.id_bytes("r")],
                          hook_evicted_ids=5, degraded=True, batch=12,
                          windows=[(900, 950, 77), (960, 990, 77)])
        d = wire.decode(buf)
        self.assertEqual(d["version"], 4)
        self.assertEqual((d["batch"], d["windows"]), (12, [[900, 950, 77], [960, 990, 77]]))
        self.assertEqual(d["request_ids"], ["a", "ééé"])
        self.assertEqual(d["request_tokens"], [1, 300])
        self.assertEqual((d["preempted"], d["resumed"]), (["p"], ["r"]))
        self.assertEqual((d["pid"], d["engine_index"], d["step"], d["hook_dropped"]), (42, 1, 7, 9))
        self.assertEqual((d["hook_evicted_ids"], d["degraded"]), (5, True))
        self.assertEqual((d["start_ns"], d["end_ns"]), (1000, 2000))
        self.assertEqual((d["prefill"], d["decode"], d["scheduled_tokens"]), (1, 2, 17))
        self.assertEqual((d["running"], d["waiting"], d["kv_usage"]), (3, 4, 0.5))
        self.assertEqual((d["service_name"], d["engine_version"], d["host"], d["instance_id"]),
                         ("svc", "0.11.0", "host-a", "4f1c-instance"))

    def test_reads_version_1(self):
        with open(os.path.join(ROOT, "..", "..", "internal", "stepwire", "testdata", "v1",
                               "vllm_preempt.bin"), "rb") as f:
            d = wire.decode(f.read())
        self.assertEqual((d["version"], d["preempted"], d["resumed"], d["degraded"]), (1, ["chatcmpl-b"], [], False))

    def test_reads_version_3(self):
        with open(os.path.join(ROOT, "..", "..", "internal", "stepwire", "testdata", "v3",
                               "vllm_preempt.bin"), "rb") as f:
            d = wire.decode(f.read())
        self.assertEqual((d["version"], d["batch"], d["windows"]), (3, 0, []))
        self.assertTrue(d["instance_id"])

    def test_windows_are_bounded_and_never_negative(self):
        ident = wire.identity("", "", "")
        wins = [(i * 10, i * 10 - 5, 1) for i in range(40)]
        d = wire.decode(wire.encode(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, 0, ident, [], [], windows=wins))
        self.assertEqual(len(d["windows"]), wire.MAX_WINDOWS)
        self.assertTrue(all(b >= a for a, b, _ in d["windows"]))

    def test_mark_round_trip(self):
        ident = wire.mark_identity("gpu-1", "inst-9")
        buf = wire.encode_mark(wire.ENGINE_VLLM, 2001, 2000, 7, 100, 90, 2001, 33, 4, ident, True)
        self.assertEqual(wire.decode_mark(buf), {
            "engine": 1, "final": True, "pid": 2001, "ppid": 2000, "batch": 7, "start_ns": 100,
            "end_ns": 100, "thread_id": 2001, "scheduled_tokens": 33, "hook_dropped": 4,
            "host": "gpu-1", "instance_id": "inst-9"})
        with self.assertRaises(ValueError):
            wire.decode_mark(buf + b"x")

    def test_unknown_kv_usage_is_flagged_absent(self):
        buf = wire.encode(0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, 0, wire.identity("", "", ""), [], [])
        self.assertIsNone(wire.decode(buf)["kv_usage"])
        self.assertEqual(len(buf), wire.HEADER_SIZE + 4, "four empty identity strings")

    def test_oversized_step_is_truncated_and_flagged(self):
        entries = [wire.entry("x" * 1000)] * 400
        buf = wire.encode(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, 0, wire.identity("", "", ""), entries,
                          [wire.id_bytes("p")], [wire.id_bytes("r")])
        self.assertLessEqual(len(buf), wire.MAX_DATAGRAM)
        d = wire.decode(buf)
        self.assertTrue(d["flags"] & wire.FLAG_IDS_TRUNCATED)
        self.assertLess(len(d["request_ids"]), 400)
        self.assertEqual((d["preempted"], d["resumed"]), ([], []), "nothing after the cut")

    def test_emitter_matches_reference_encoder(self):
        ident = wire.identity("svc", "1.0", "h")
        for kv, entries, pre, res in ((0.25, [wire.entry("a"), wire.entry("b", 4)], [wire.id_bytes("c")], []),
                                      (None, [], [], [wire.id_bytes("d")]),
                                      (float("nan"), [], [], []),
                                      (None, [wire.entry("x" * 1000)] * 400, [], []),
                                      (0.5, [wire.entry("y" * 100)] * 2100, [wire.id_bytes("z")], [])):
            for degraded in (False, True):
                for batch, wins in ((0, ()), (5, [(90, 120, 3), (150, 160, 3)])):
                    ref = wire.encode(wire.ENGINE_SGLANG, 42, 3, 9, 100, 200, 1, 2, 17, 3, 4, kv, 7, ident,
                                      entries, pre, res, hook_evicted_ids=11, degraded=degraded,
                                      batch=batch, windows=wins)
                    self.assertEqual(_emitted(wire.ENGINE_SGLANG, 42, 3, 9, 100, 200, 1, 2, 17, 3, 4, kv,
                                              ident, entries, pre, res, degraded, batch, wins), ref)

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

    def test_windows_are_checked_and_bounded(self):
        wins = [(500, 400, 2 ** 32 + 9)] + [(i, i + 1, 3) for i in range(2 * wire.MAX_WINDOWS)]
        flat = wire.flat_windows(wins)
        self.assertEqual(len(flat), 3 * wire.MAX_WINDOWS)
        self.assertEqual(flat[:3], [500, 500, 9], "end clamped to start, thread id masked")
        d = wire.decode(_emitted(1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, None, wire.identity("", "", ""), [], [],
                                 batch=2, windows=wins))
        self.assertEqual(d["windows"], [list(flat[i:i + 3]) for i in range(0, len(flat), 3)])

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
        self.sent.append(bytes(data))
        return True


def _emitted(engine, pid, index, step, start, end, prefill, decode, scheduled, running,
             waiting, kv, ident, entries, pre, res=(), degraded=False, batch=0, windows=()):
    """The datagram the hook's Emitter sends for one step."""
    cap = _Capture()
    em = Emitter(engine, "x", "1.0", index, cap)
    em.pid, em.step, em.evicted, em.degraded = pid, step - 1, 11, degraded
    em.dropped = cap.dropped
    em.set_identity(ident)
    em.emit(start, end, prefill, decode, scheduled, running, waiting, kv, entries, pre, res, batch,
            wire.flat_windows(windows))
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


if __name__ == "__main__":
    unittest.main()
