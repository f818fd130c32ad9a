# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Shared test helpers: a real collector socket, a capturing sender, and the
comparison of datagrams with the fakes' ground truth."""

import os
import socket
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

import drive  # noqa: E402
import inferprof_hook  # noqa: E402
from guard import Guarded  # noqa: E402
from inferprof_hook import _state, wire  # noqa: E402

# What a step datagram and a batch of the fakes' ground truth share.
FIELDS = ("request_ids", "request_tokens", "prefill", "decode", "scheduled_tokens", "preempted", "resumed")


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


class CaptureSender:
    """Keeps every datagram in memory, so in-process tests lose none."""

    def __init__(self):
        self.sent = 0
        self.dropped = 0
        self.datagrams = []

    def send(self, data):
        self.datagrams.append(data)
        self.sent += 1
        return True

    def close(self):
        pass

    def reset_after_fork(self):
        pass

    def steps(self):
        return [wire.decode(d) for d in self.datagrams]


def made_of(step):
    """The batch fields of a decoded datagram, ids sorted where order is free."""
    d = {k: step[k] for k in FIELDS}
    d["preempted"] = sorted(d["preempted"])
    d["resumed"] = sorted(d["resumed"])
    return d


def expected(truth):
    return [{k: t[k] for k in FIELDS} for t in truth if drive.reported(t)]


class HookTest(unittest.TestCase):
    def setUp(self):
        self._env = dict(os.environ)
        os.environ["OTEL_SERVICE_NAME"] = "svc-test"
        _state.reset()
        self.sender = _state._sender = CaptureSender()
        self.assertTrue(inferprof_hook.install())
        Guarded.reads = 0

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self._env)
        _state.reset()
        self.assertEqual(Guarded.reads, 0, "prompt or output token values were read")
