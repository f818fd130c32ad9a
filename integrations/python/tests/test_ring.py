# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The hook's shared-memory ring against a real socket and a reader that
follows the receiver's protocol (ring.Reader): what a step costs nothing
in system calls must still arrive whole, in order, and counted when lost."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

from .helpers import BOOTSTRAP, FAKES, Collector
from inferprof_hook import _state, emitter, ring, wire
from inferprof_hook.sender import Sender

SECOND = 1_000_000_000


def _emitter(engine_index=0):
    """An emitter on the process's real sender, as an engine gets one."""
    return emitter.Emitter(wire.ENGINE_VLLM, "vllm", "test", engine_index, _state.sender())


def _step(em, i, ids=("a",), t=None):
    t = (i + 1) * 1000 if t is None else t
    return em.emit(t, t + 500, 0, len(ids), len(ids), len(ids), 0, 0.5, [em.entry(r) for r in ids])


class RingTest(unittest.TestCase):
    def setUp(self):
        self._env = dict(os.environ)
        _state.reset()
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "step.sock")
        self.c = Collector(path=self.path)
        os.environ[_state.ENV_ENDPOINT] = self.path
        os.environ.pop(ring.ENV_RING, None)
        # The sender's reconnect interval, in test time.
        self.clock = [100.0]
        _state._sender = Sender(self.path, clock=lambda: self.clock[0])

    def tearDown(self):
        self.c.close()
        self.dir.cleanup()
        _state.reset()
        os.environ.clear()
        os.environ.update(self._env)

    def test_steps_go_through_the_ring_in_order_across_its_end(self):
        os.environ[ring.ENV_RING] = str(ring.MIN_CAPACITY)
        em = _emitter()
        got = []
        ids = ["chatcmpl-%032x" % i for i in range(20)]
        for i in range(3000):
            self.assertTrue(_step(em, i, ids[:1 + i % 20]))
            if i % 50 == 0:
                got += self.c.drain()
        got += self.c.drain()
        self.assertIsNotNone(em.ring, "the ring was set up")
        self.assertGreater(em.ring.w, 10 * ring.MIN_CAPACITY, "and wrapped many times")
        self.assertEqual([d["step"] for d in got], list(range(1, 3001)))
        self.assertEqual(got[7]["request_ids"], ids[:8])
        self.assertEqual((em.sent, em.dropped), (3000, 0))

    def test_full_ring_drops_and_counts_then_recovers(self):
        os.environ[ring.ENV_RING] = str(ring.MIN_CAPACITY)
        em = _emitter()
        _step(em, 0)
        self.c.drain()  # attaches the ring
        big = ["x" * 1000] * 30
        n = 0
        while _step(em, n + 1, big, t=1000):
            n += 1
        self.assertGreater(em.dropped, 0)
        got = self.c.drain()
        self.assertEqual(len(got), n)
        self.assertTrue(_step(em, 0, t=2000), "room again once read")
        last = self.c.drain()[-1]
        self.assertEqual(last["hook_dropped"], 1, "the drop travels in the next record")
        self.assertEqual(last["step"], n + 3, "and shows as a gap in step numbers")

    def test_no_collector_means_datagrams_and_a_ring_once_it_comes(self):
        self.c.close()
        em = _emitter()
        self.assertFalse(_step(em, 0, t=SECOND))
        self.assertIsNone(em.ring)
        self.assertEqual(em.dropped, 1)
        self.c = Collector(path=self.path)
        self.assertFalse(_step(em, 1, t=SECOND + 1000), "the sender retries once a second")
        self.clock[0] += 1.5
        self.assertTrue(_step(em, 2, t=3 * SECOND))
        self.assertIsNotNone(em.ring)
        self.assertEqual([d["step"] for d in self.c.drain()], [3])

    def test_rings_off_sends_datagrams(self):
        os.environ[ring.ENV_RING] = "0"
        em = _emitter()
        for i in range(5):
            self.assertTrue(_step(em, i))
        self.assertIsNone(em.ring)
        self.assertEqual(self.c.reader.rings, {})
        self.assertEqual([d["step"] for d in self.c.drain()], [1, 2, 3, 4, 5])

    def test_a_restarted_collector_gets_the_ring_again_and_reads_on(self):
        em = _emitter()
        for i in range(3):
            _step(em, i, t=SECOND + i)
        self.assertEqual(len(self.c.drain()), 3)
        self.c.close()  # the collector stops; the ring stays with the hook
        for i in range(3, 6):
            self.assertTrue(_step(em, i, t=SECOND + i), "written for the next collector")
        self.c = Collector(path=self.path)
        # Once a check finds the beat standing still since the previous one
        # (a second or two), the hook announces the ring again; its socket
        # reconnects at once, the old collector's being gone.
        _step(em, 6, t=3 * SECOND)
        self.assertEqual(self.c.drain(), [], "the old reader's last beat still counts")
        _step(em, 7, t=5 * SECOND)
        self.assertEqual([d["step"] for d in self.c.drain()], [4, 5, 6, 7, 8], "nothing twice, nothing lost")

    def test_a_reader_that_never_reads_is_given_up(self):
        em = _emitter()
        self.assertTrue(_step(em, 0, t=SECOND))
        sock = self.c.reader.sock  # announcements arrive; nothing attaches
        t = SECOND
        for i in range(ring.MAX_UNANSWERED + 1):
            t += 2 * SECOND
            _step(em, i + 1, t=t)
        self.assertIsNone(em.ring, "given up")
        self.assertEqual(em.dropped, ring.MAX_UNANSWERED + 1, "what the ring held counts as dropped")
        self.assertTrue(_step(em, 9, t=t + 1))
        datagrams = []
        while True:
            try:
                datagrams.append(sock.recv(1 << 20))
            except BlockingIOError:
                break
        steps = [wire.decode(d) for d in datagrams if d[:4] == wire.MAGIC]
        self.assertEqual(steps[-1]["hook_dropped"], ring.MAX_UNANSWERED + 1)

    def test_a_sleeping_reader_gets_one_wake_per_sleep(self):
        em = _emitter()
        _step(em, 0)
        self.c.drain()
        self.c.reader.sleep(1)
        for i in range(1, 4):
            _step(em, i)
        self.c.drain()
        self.assertEqual(self.c.reader.wakes, 1)
        self.c.reader.sleep(3)
        _step(em, 5)
        self.c.drain()
        self.assertEqual(self.c.reader.wakes, 2)

    def test_forked_child_does_not_write_to_the_parents_ring(self):
        em = _emitter()
        _step(em, 0)
        self.assertEqual(len(self.c.drain()), 1)
        parent_ring = em.ring
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            ok = em.ring is None and parent_ring.mm is None
            _step(em, 1)  # its own ring, or a datagram
            os._exit(0 if ok and em.ring is not parent_ring else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        got = self.c.drain()
        self.assertEqual(len(got), 1, "the child's step arrives on its own")
        self.assertEqual(len(self.c.reader.rings), 2, "through its own ring")
        self.assertIsNotNone(parent_ring.mm, "the parent's ring is untouched")

    def test_engine_killed_mid_run_loses_nothing_it_wrote(self):
        """A fake vLLM engine killed with SIGKILL after 12 steps: what the
        hook wrote is still read, since the reader holds the ring."""
        env = dict(os.environ, PYTHONPATH=BOOTSTRAP + os.pathsep + FAKES,
                   INFERPROF_TEST_KILL_AFTER="12")
        r = subprocess.run([sys.executable, os.path.join(FAKES, "drive.py"), "--engine", "vllm"],
                           env=env, capture_output=True, timeout=120)
        self.assertEqual(r.returncode, -signal.SIGKILL, r.stderr)
        got = self.c.drain()
        self.assertEqual(len(self.c.reader.rings), 1, "the engine wrote to a ring")
        self.assertEqual([d["step"] for d in got], list(range(1, 13)))


class InstanceIDTest(unittest.TestCase):
    def setUp(self):
        self._env = os.environ.get(_state.ENV_RESOURCE)

    def tearDown(self):
        os.environ.pop(_state.ENV_RESOURCE, None)
        if self._env is not None:
            os.environ[_state.ENV_RESOURCE] = self._env

    def test_read_as_the_sdk_reads_it(self):
        for value, want in (
                ("service.instance.id=abc", "abc"),
                ("a=b, service.instance.id = x%2Cy ,c=d", "x,y"),
                ("service.instance.id=first,service.instance.id=last", "last"),
                ("broken,service.instance.id=ok", "ok"),
                ("service.name=svc", ""),
                ("", "")):
            os.environ[_state.ENV_RESOURCE] = value
            self.assertEqual(_state.instance_id(), want, value)

    def test_travels_in_every_record(self):
        os.environ[_state.ENV_RESOURCE] = "service.instance.id=7d1c0f2e-inst"
        em = emitter.Emitter(wire.ENGINE_VLLM, "vllm", "1", 0, _Capture())
        em.emit(1, 2, 0, 0, 1, 0, 0, None, [])
        self.assertEqual(wire.decode(em.sender.data[0])["instance_id"], "7d1c0f2e-inst")

    def test_the_pods_name_names_the_host(self):
        # An engine on the host network: gethostname gives the node, the
        # downward API gives the pod (deploy/manifests/engine-vllm-example.yaml).
        os.environ[_state.ENV_RESOURCE] = "k8s.pod.ip=10.0.0.7,k8s.pod.name=vllm%2D0"
        em = emitter.Emitter(wire.ENGINE_VLLM, "vllm", "1", 0, _Capture())
        em.emit(1, 2, 0, 0, 1, 0, 0, None, [])
        self.assertEqual(wire.decode(em.sender.data[0])["host"], "vllm-0")
        os.environ[_state.ENV_RESOURCE] = "k8s.pod.ip=10.0.0.7"
        em = emitter.Emitter(wire.ENGINE_VLLM, "vllm", "1", 0, _Capture())
        em.emit(1, 2, 0, 0, 1, 0, 0, None, [])
        self.assertEqual(wire.decode(em.sender.data[0])["host"], socket.gethostname())

    def test_too_long_is_left_out_with_a_warning(self):
        os.environ[_state.ENV_RESOURCE] = "service.instance.id=" + "x" * 300
        _state.reset()
        with self.assertLogs("inferprof_hook", "WARNING"):
            em = emitter.Emitter(wire.ENGINE_VLLM, "vllm", "1", 0, _Capture())
        em.emit(1, 2, 0, 0, 1, 0, 0, None, [])
        self.assertEqual(wire.decode(em.sender.data[0])["instance_id"], "")


class _Capture:
    def __init__(self):
        self.data = []

    def send(self, data):
        self.data.append(bytes(data))
        return True


if __name__ == "__main__":
    unittest.main()
