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
from inferprof_hook import _state, ring, wire  # noqa: E402

# What a step datagram and a batch of the fakes' ground truth share.
# The batch number too: the hook counts the executor's calls (vLLM) or
# run_batch (SGLang), and the fakes number their batches themselves.
FIELDS = ("request_ids", "request_tokens", "prefill", "decode", "scheduled_tokens", "preempted", "resumed",
          "batch")


class Collector:
    """A real Unix datagram socket standing in for the engine_step receiver:
    it takes the rings the hook announces and drains them, and reads step
    datagrams (ring.Reader, which reads them as the receiver does)."""

    def __init__(self, rcvbuf=None, path=None, decode=None):
        """Binds path (a new private folder's step.sock if None)."""
        self.dir = None if path else tempfile.TemporaryDirectory()
        self.path = path or os.path.join(self.dir.name, "step.sock")
        self.reader = ring.Reader(self.path, decode or wire.decode)
        self.sock = self.reader.sock
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)

    def drain(self):
        return self.reader.poll()

    def read_while(self, fn):
        """Reads on a thread while fn runs, since a Unix datagram queue holds
        only net.unix.max_dgram_qlen (often 10) unread datagrams; the
        engine's process can exit before its ring is drained, and its
        records are still read (the collector holds the memory)."""
        got, stop = [], threading.Event()

        def loop():
            while not stop.wait(0.002):
                got.extend(self.reader.poll())

        t = threading.Thread(target=loop)
        t.start()
        try:
            result = fn()
        finally:
            stop.set()
            t.join()
        return result, got + self.drain()

    def close(self):
        self.reader.close()
        if self.dir is not None:
            self.dir.cleanup()
        elif os.path.exists(self.path):
            os.unlink(self.path)


class CaptureSender:
    """Keeps every datagram in memory, so in-process tests lose none."""

    def __init__(self):
        self.sent = 0
        self.dropped = 0
        self.datagrams = []

    def send(self, data):
        self.datagrams.append(bytes(data))
        self.sent += 1
        return True

    def close(self):
        pass

    def reset_after_fork(self):
        pass

    def steps(self):
        return [wire.decode(d) for d in self.datagrams]


def decode_any(b):
    """A step record or a launch mark (dicts; a mark's has "final")."""
    return wire.decode_mark(b) if b[:4] == wire.MARK_MAGIC else wire.decode(b)


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

    def patch_module(self, module, **attrs):
        """Sets module attributes for this test only (an older release's
        classes in place of the fake's)."""
        for name, value in attrs.items():
            old = getattr(module, name)
            self.addCleanup(setattr, module, name, old)
            setattr(module, name, value)
        self.assertEqual(Guarded.reads, 0, "prompt or output token values were read")
