# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-engine-instance step emitter: numbers one step after another and writes
it to the engine's shared-memory ring, or sends it as a datagram when there
is no ring (see ring.py)."""

import os

from . import _state, ring as _ring, wire
from .ring import HEADER_BYTES, W_SLEEP, W_WRITE

# Bound on the request id table (engine id -> encoded wire entry). Ids leave
# it when the engine says the request finished; past the bound the oldest go
# first and are counted (hook_evicted_ids on the wire, which also counts the
# engines' pending-preemption tables), so a leak of ids the engine never
# finishes cannot grow memory, and a live request loses at most its API-id
# mapping, visibly.
MAX_CACHED_IDS = 65536

# How often to try to set up a ring while steps go out as datagrams, and how
# long to wait after the collector left a ring unread.
RING_RETRY_NS = 1_000_000_000
RING_GIVE_UP_NS = 60_000_000_000
WINDOW_SIZE = wire.WINDOW.size


def service_name(default):
    return os.environ.get("OTEL_SERVICE_NAME") or default


class Emitter:
    """Holds one engine instance's identity, step counter, id table and ring.

    ids maps an engine request id to its encoded one-token entry under the
    id the request spans carry, so the common decode case costs one dict
    lookup per request.
    """

    __slots__ = ("engine", "engine_index", "sender", "ident", "step", "ids", "pid", "prefix",
                 "pack_into", "scratch", "room", "heads", "evicted", "degraded", "head", "sent", "dropped", "ring",
                 "ring_at", "capacity", "__weakref__")

    def __init__(self, engine, engine_name, engine_version, engine_index, sender):
        self.engine = engine
        self.engine_index = engine_index or 0
        self.sender = sender
        iid = _state.instance_id()
        if len(iid.encode("utf-8", "replace")) > wire.MAX_SHORT:
            _state.warn_once("instance-id", "inferprof: service.instance.id in OTEL_RESOURCE_ATTRIBUTES "
                             "is longer than %d bytes; steps are matched to requests by service.name "
                             "and host instead", wire.MAX_SHORT)
        self.set_identity(wire.identity(service_name(engine_name), engine_version,
                                        _state.engine_host(), iid))
        self.step = 0
        self.ids = {}
        self.evicted = 0
        self.degraded = False
        self.pid = os.getpid()
        self.prefix = wire.prefix(engine)
        self.sent = self.dropped = 0
        self.ring = None
        self.ring_at = 0
        # Rings need a real socket to announce them on (not a test capture).
        self.capacity = _ring.capacity_from_env() if (
            _ring.supported() and hasattr(sender, "send_fds")) else 0
        _state.track(self)

    def __del__(self):
        _state.retire(self)

    def set_identity(self, ident):
        """Sets the identity block and what is precomputed from it."""
        self.ident = ident
        head = wire.head_struct(ident)
        self.pack_into = head.pack_into
        # The frame, header and identity of a record that does not go
        # straight into the ring.
        self.scratch = bytearray(head.size)
        # A record is the frame, the header, the identity, the launch
        # windows, then the body.
        self.head = wire.HEADER_SIZE + len(ident)
        # The same, and room, for records with n windows, made when needed.
        self.heads = [None] * (wire.MAX_WINDOWS + 1)
        # Bytes left for token entries and preempted/resumed ids in one record.
        self.room = wire.MAX_DATAGRAM - self.head

    def _head(self, nw):
        """pack_into, scratch buffer and size of the header, identity and
        nw launch windows, and the room left (see set_identity)."""
        h = wire.head_struct(self.ident, nw)
        self.heads[nw] = got = (h.pack_into, bytearray(h.size), self.head + nw * WINDOW_SIZE,
                                self.room - nw * WINDOW_SIZE)
        return got

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
             kv_usage, entries, preempted=(), resumed=(), batch=0, windows=()):
        """Encodes one step and writes it to the ring, or sends it.

        This is wire.encode specialised for the hot path: the frame, header
        and identity are packed in one call straight into the ring (or, for
        a datagram or a record that wraps, into a scratch buffer), and
        out-of-range counts are not masked (struct.error then reaches the
        hook, which logs it once and loses only this step). See
        ring.Ring.write for the protocol. windows is the batch's launch
        windows as a flat (start_ns, end_ns, thread id, ...) list, at most
        wire.MAX_WINDOWS of them, ends not before starts.
        """
        self.step += 1
        flags = wire.FLAG_DEGRADED if self.degraded else 0
        if kv_usage is not None and 0.0 <= kv_usage <= 1.0:
            flags |= wire.FLAG_KV_USAGE
            kv = kv_usage
        elif kv_usage is None or kv_usage != kv_usage:  # unknown, or NaN
            kv = 0.0
        else:
            # The decoder rejects values outside 0..1; engines' own ratios
            # can stray a little past the ends.
            flags |= wire.FLAG_KV_USAGE
            kv = 0.0 if kv_usage < 0 else 1.0
        if end_ns < start_ns:
            end_ns = start_ns  # the wall clock stepped back
        n = len(entries)
        body = b"".join(entries)
        if preempted or resumed:
            m = len(preempted)
            k = len(resumed)
            body += b"".join(preempted) + b"".join(resumed)
            over = m > 0xFFFF or k > 0xFFFF
        else:
            m = k = 0
            over = False
        if windows:
            # A flat (start, end, thread, ...) list, checked by the caller
            # (wire.flat_windows): packed with the header, right after the
            # identity, in the same call.
            nw = len(windows) // 3
            pack_into, scratch, head, room = self.heads[nw] or self._head(nw)
        else:
            nw = 0
            pack_into, scratch, head, room = self.pack_into, self.scratch, self.head, self.room
        # Entries take at least 4 bytes each, so within room n < 65536.
        if over or len(body) > room:
            body, n, m, k = wire.truncate(room, entries, preempted, resumed)
            flags |= wire.FLAG_IDS_TRUNCATED
        size = head + len(body)  # the record without its frame
        total = size + 4
        r = self.ring
        if r is not None:
            w = r.w
            if w + total - r.r > r.cap and not r.room(total):
                self.dropped += 1
                if end_ns >= r.check_at and not r.check(end_ns):
                    self._close_ring(end_ns + RING_GIVE_UP_NS)
                return False
            pos = w & r.mask
            if pos + total <= r.cap:
                buf = r.mm
                at = HEADER_BYTES + pos
            else:
                buf, at = scratch, 0
        else:
            buf, at = scratch, 0
        if nw == 1:  # vLLM's usual step: no star call
            pack_into(
                buf, at, size, self.prefix, flags, self.pid, self.engine_index, self.step, start_ns,
                end_ns, prefill, decode, scheduled, running, waiting, kv, self.dropped, self.evicted,
                n, m, k, batch, 1, self.ident, windows[0], windows[1], windows[2])
        elif nw:
            pack_into(
                buf, at, size, self.prefix, flags, self.pid, self.engine_index, self.step, start_ns,
                end_ns, prefill, decode, scheduled, running, waiting, kv, self.dropped, self.evicted,
                n, m, k, batch, nw, self.ident, *windows)
        else:
            pack_into(
                buf, at, size, self.prefix, flags, self.pid, self.engine_index, self.step, start_ns,
                end_ns, prefill, decode, scheduled, running, waiting, kv, self.dropped, self.evicted,
                n, m, k, batch, 0, self.ident)
        if r is None:
            if self.capacity and end_ns >= self.ring_at and self._open_ring(end_ns):
                return self._ring_write(bytes(buf) + body)
            if self.sender.send(buf[4:] + body):
                self.sent += 1
                return True
            self.dropped += 1
            return False
        if buf is r.mm:
            if body:
                at += head + 4
                buf[at:at + len(body)] = body
        else:
            r.put(bytes(buf) + body)
        r.w = w = w + total
        r.records += 1
        q = r.q
        q[W_WRITE] = w  # publishes the record: stored after its bytes
        self.sent += 1
        sleep = q[W_SLEEP]
        if sleep & 1:
            r.wake(sleep)
        if end_ns >= r.check_at and not r.check(end_ns):
            self._close_ring(end_ns + RING_GIVE_UP_NS)
        return True

    def send_record(self, rec, now_ns):
        """Writes one record (a launch mark) to the ring, or sends it; the
        plain path of emit (no system call unless the reader sleeps), for
        an executor worker's one mark per batch."""
        r = self.ring
        if r is None:
            if self.capacity and now_ns >= self.ring_at and self._open_ring(now_ns):
                return self._ring_write(wire.FRAME.pack(len(rec)) + rec)
            if self.sender.send(rec):
                self.sent += 1
                return True
            self.dropped += 1
            return False
        if not r.write(wire.FRAME.pack(len(rec)) + rec):
            self.dropped += 1
            if now_ns >= r.check_at and not r.check(now_ns):
                self._close_ring(now_ns + RING_GIVE_UP_NS)
            return False
        self.sent += 1
        sleep = r.q[W_SLEEP]
        if sleep & 1:
            r.wake(sleep)
        if now_ns >= r.check_at and not r.check(now_ns):
            self._close_ring(now_ns + RING_GIVE_UP_NS)
        return True

    def _ring_write(self, rec):
        """The first record of a new ring, through the plain write."""
        if self.ring.write(rec):
            self.sent += 1
            return True
        self.dropped += 1
        return False

    def _open_ring(self, now_ns):
        """Sets up a ring and announces it; False (datagrams) when the
        collector is not there or the system cannot make one."""
        self.ring_at = now_ns + RING_RETRY_NS
        try:
            r = _ring.Ring(self.sender, self.capacity)
        except Exception:
            self.capacity = 0
            _state.fail_once("step ring setup")
            return False
        if not r.announce():
            r.close()
            return False
        r.check_at = now_ns + _ring.CHECK_NS
        self.ring = r
        _state.rings_opened += 1
        return True

    def _close_ring(self, retry_at):
        """Gives the ring up: the collector never read it. What it held
        counts as dropped."""
        r, self.ring = self.ring, None
        self.ring_at = retry_at
        self.dropped += r.unread_records()
        r.close()
        _state.warn_once("ring-unread", "inferprof: the collector did not read the engine step "
                         "ring; sending steps as datagrams (is it an older inferprof?)")

    def forked(self):
        """In a forked child: the parent's ring is not ours."""
        self.ring = None
        self.ring_at = 0
