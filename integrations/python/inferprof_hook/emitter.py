"""Per-engine-instance step emitter: numbers one step after another and sends it."""

import os
import socket as _socket

from . import wire

# Bound on cached request-id encodings; reaching it clears the cache (ids are
# re-encoded on demand), so a leak of unfinished ids cannot grow memory.
MAX_CACHED_IDS = 65536


def service_name(default):
    return os.environ.get("OTEL_SERVICE_NAME") or default


class Emitter:
    """Holds one engine instance's identity, step counter and id cache.

    ids maps an engine request id to its encoded one-token entry, so the
    common decode case costs one dict lookup and one append per request.
    """

    __slots__ = ("engine", "engine_index", "sender", "ident", "step", "ids", "pid", "prefix",
                 "pack", "room")

    def __init__(self, engine, engine_name, engine_version, engine_index, sender):
        self.engine = engine
        self.engine_index = engine_index or 0
        self.sender = sender
        self.ident = wire.identity(service_name(engine_name), engine_version,
                                   _socket.gethostname())
        self.step = 0
        self.ids = {}
        self.pid = os.getpid()
        self.prefix = wire.prefix(engine)
        self.pack = wire.head_struct(self.ident).pack
        # Bytes left for token entries and preempted ids in one datagram.
        self.room = wire.MAX_DATAGRAM - wire.HEADER_SIZE - len(self.ident)

    def entry(self, rid):
        """The cached one-token wire entry of request rid."""
        e = self.ids.get(rid)
        if e is None:
            if len(self.ids) >= MAX_CACHED_IDS:
                self.ids.clear()
            e = self.ids[rid] = wire.entry(rid)
        return e

    def alias(self, rid, external_id):
        """Reports rid under external_id (the API request id) from now on."""
        if external_id and external_id != rid:
            if len(self.ids) >= MAX_CACHED_IDS:
                self.ids.clear()
            self.ids[rid] = wire.entry(external_id)

    def forget(self, rid):
        self.ids.pop(rid, None)

    def emit(self, start_ns, end_ns, prefill, decode, scheduled, running, waiting,
             kv_usage, entries, preempted):
        """Encodes one step and sends it.

        This is wire.encode specialised for the hot path: the header and
        identity are packed in one call, and out-of-range counts are not
        masked (struct.error then reaches the hook, which logs it once and
        loses only this step).
        """
        self.step += 1
        if kv_usage is None or kv_usage != kv_usage:  # unknown, or NaN
            flags, kv = 0, 0.0
        elif 0.0 <= kv_usage <= 1.0:
            flags, kv = wire.FLAG_KV_USAGE, kv_usage
        else:
            # The decoder rejects values outside 0..1; engines' own ratios
            # can stray a little past the ends.
            flags, kv = wire.FLAG_KV_USAGE, (0.0 if kv_usage < 0 else 1.0)
        if end_ns < start_ns:
            end_ns = start_ns  # the wall clock stepped back
        n = len(entries)
        m = len(preempted)
        body = b"".join(entries)
        if m:
            body += b"".join(preempted)
        if len(body) > self.room or n > 0xFFFF or m > 0xFFFF:
            body, n, m = wire.truncate(self.room, entries, preempted)
            flags |= wire.FLAG_IDS_TRUNCATED
        sender = self.sender
        return sender.send(self.pack(
            self.prefix, flags, self.pid, self.engine_index, self.step, start_ns, end_ns,
            prefill, decode, scheduled, running, waiting, kv, sender.dropped, n, m,
            self.ident) + body)
