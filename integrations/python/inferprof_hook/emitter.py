# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-engine-instance step emitter: numbers one step after another and sends it."""

import os
import socket as _socket

from . import wire

# Bound on the request id table (engine id -> encoded wire entry). Ids leave
# it when the engine says the request finished; past the bound the oldest go
# first and are counted (hook_evicted_ids on the wire, which also counts the
# engines' pending-preemption tables), so a leak of ids the engine never
# finishes cannot grow memory, and a live request loses at most its API-id
# mapping, visibly.
MAX_CACHED_IDS = 65536


def service_name(default):
    return os.environ.get("OTEL_SERVICE_NAME") or default


class Emitter:
    """Holds one engine instance's identity, step counter and id table.

    ids maps an engine request id to its encoded one-token entry under the
    id the request spans carry, so the common decode case costs one dict
    lookup and one append per request.
    """

    __slots__ = ("engine", "engine_index", "sender", "ident", "step", "ids", "pid", "prefix",
                 "pack", "room", "evicted", "degraded")

    def __init__(self, engine, engine_name, engine_version, engine_index, sender):
        self.engine = engine
        self.engine_index = engine_index or 0
        self.sender = sender
        self.ident = wire.identity(service_name(engine_name), engine_version,
                                   _socket.gethostname())
        self.step = 0
        self.ids = {}
        self.evicted = 0
        self.degraded = False
        self.pid = os.getpid()
        self.prefix = wire.prefix(engine)
        self.pack = wire.head_struct(self.ident).pack
        # Bytes left for token entries and preempted/resumed ids in one datagram.
        self.room = wire.MAX_DATAGRAM - wire.HEADER_SIZE - len(self.ident)

    def _put(self, rid, e):
        ids = self.ids
        if rid not in ids and len(ids) >= MAX_CACHED_IDS:
            try:
                # Insertion order: the oldest id goes. Another thread may add
                # at the same time (vLLM records ids on its input thread).
                del ids[next(iter(ids))]
                self.evicted += 1
            except (RuntimeError, StopIteration, KeyError):
                pass
        ids[rid] = e

    def entry(self, rid):
        """The cached one-token wire entry of request rid."""
        e = self.ids.get(rid)
        if e is None:
            e = wire.entry(rid)
            self._put(rid, e)
        return e

    def alias(self, rid, external_id):
        """Reports rid under external_id (the API request id) from now on."""
        if external_id and external_id != rid:
            self._put(rid, wire.entry(external_id))

    def id_bytes(self, rid):
        """Request rid as a bare wire id (preempted and resumed lists)."""
        return self.entry(rid)[2:]

    def forget(self, rid):
        self.ids.pop(rid, None)

    def emit(self, start_ns, end_ns, prefill, decode, scheduled, running, waiting,
             kv_usage, entries, preempted=(), resumed=()):
        """Encodes one step and sends it.

        This is wire.encode specialised for the hot path: the header and
        identity are packed in one call, and out-of-range counts are not
        masked (struct.error then reaches the hook, which logs it once and
        loses only this step).
        """
        self.step += 1
        flags = wire.FLAG_DEGRADED if self.degraded else 0
        if kv_usage is None or kv_usage != kv_usage:  # unknown, or NaN
            kv = 0.0
        elif 0.0 <= kv_usage <= 1.0:
            flags |= wire.FLAG_KV_USAGE
            kv = kv_usage
        else:
            # The decoder rejects values outside 0..1; engines' own ratios
            # can stray a little past the ends.
            flags |= wire.FLAG_KV_USAGE
            kv = 0.0 if kv_usage < 0 else 1.0
        if end_ns < start_ns:
            end_ns = start_ns  # the wall clock stepped back
        n = len(entries)
        m = len(preempted)
        k = len(resumed)
        body = b"".join(entries)
        if m or k:
            body += b"".join(preempted) + b"".join(resumed)
        if len(body) > self.room or n > 0xFFFF or m > 0xFFFF or k > 0xFFFF:
            body, n, m, k = wire.truncate(self.room, entries, preempted, resumed)
            flags |= wire.FLAG_IDS_TRUNCATED
        sender = self.sender
        return sender.send(self.pack(
            self.prefix, flags, self.pid, self.engine_index, self.step, start_ns, end_ns,
            prefill, decode, scheduled, running, waiting, kv, sender.dropped, self.evicted,
            n, m, k, self.ident) + body)
