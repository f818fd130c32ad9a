# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""A shared-memory ring of step records: the hook's path with no system call
per step.

The hook creates an anonymous memory file (memfd), maps it, and hands the
file to the collector's engine_step receiver once, with one datagram over
the receiver's socket (SCM_RIGHTS). From then on a step is a copy into the
shared memory and one 8-byte store of the write index; the receiver polls
the ring as it polls its socket. The layout is in docs/step-wire.md
("Ring"); internal/stepwire reads it.

What the ring costs and guarantees:
- No file on disk and nothing to clean up: the memory goes when the engine
  and the collector both let go of it. The file is sealed against resizing,
  so the collector never maps a file that shrinks under it.
- The collector learns that the engine is gone when the write end of a pipe
  whose read end it holds closes (the engine exited or crashed); it then
  reads what is left and lets the ring go. A crashed engine loses at most
  the record it was writing.
- A full ring drops the step and counts it, as a full socket queue does.
- A restarted collector does not know the ring: the reader bumps a beat
  counter every poll, and a ring whose beat stood still for a second is
  announced again. The read index lives in the ring, so the new reader goes
  on where the old one stopped.
- An idle collector stops polling and waits on its socket. It marks each
  ring as sleeping first; the first step after that sends one small wake
  datagram.
"""

import array
import atexit
import fcntl
import mmap
import os
import socket
import struct
import weakref

MAGIC = b"IPSR"
VERSION = 1
HEADER_BYTES = 4096
# Ring sizes: a power of two, at least 64 KiB and at most 64 MiB of records.
MIN_CAPACITY = 1 << 16
MAX_CAPACITY = 1 << 26
DEFAULT_CAPACITY = 1 << 22

# Fixed part of the header: magic, version, flags, header bytes, capacity,
# pid, reserved, ring id.
HEAD = struct.Struct("<4sHHIIIIQ")
# Index (in 8-byte words) of the shared counters in the header. Writer and
# reader words sit on separate cache lines.
W_WRITE = 8          # byte 64, writer: bytes written since the ring was made
W_READ = 16          # byte 128, reader: bytes consumed
W_SLEEP = 17         # byte 136, reader: odd while it waits for a wake datagram
W_BEAT = 18          # byte 144, reader: +1 per poll
W_READ_RECORDS = 19  # byte 152, reader: records consumed

# Each record is preceded by its length.
FRAME = struct.Struct("<I")

# Control datagrams share the receiver's socket with step datagrams and are
# told apart by their magic: announce (with the memfd and the pipe's read
# end attached) and wake.
CONTROL = struct.Struct("<4sBBHQ")
KIND_ANNOUNCE = 1
KIND_WAKE = 2

# A reader that has not beaten within this long is announced to again.
CHECK_NS = 1_000_000_000
# Announcements delivered without the reader ever beating before the hook
# gives the ring up and goes back to datagrams.
MAX_UNANSWERED = 5

ENV_RING = "INFERPROF_STEP_RING_BYTES"

_rings = weakref.WeakSet()


def capacity_from_env():
    """The ring capacity INFERPROF_STEP_RING_BYTES asks for (rounded up to a
    power of two within bounds), or 0 when it turns rings off."""
    v = os.environ.get(ENV_RING, "").strip()
    if not v:
        return DEFAULT_CAPACITY
    try:
        n = int(v)
    except ValueError:
        return DEFAULT_CAPACITY
    if n <= 0:
        return 0
    n = min(max(n, MIN_CAPACITY), MAX_CAPACITY)
    return 1 << (n - 1).bit_length()


class Ring:
    """The writer's side of one ring. One thread writes (the engine loop that
    owns the emitter); it is not safe for concurrent writers.

    The emitter inlines the fast path of write (see Emitter.emit): these
    attributes are read there directly.
    """

    __slots__ = ("mm", "q", "cap", "mask", "w", "r", "records", "fd", "pipe", "ring_id",
                 "beat", "check_at", "unanswered", "woken", "sender", "control", "__weakref__")

    def __init__(self, sender, capacity):
        self.mm = self.q = None
        self.fd = -1
        self.pipe = (-1, -1)
        self.sender = sender
        try:
            fd = self.fd = os.memfd_create("inferprof-step-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, HEADER_BYTES + capacity)
            # The size can never change again, so a mapping of it never
            # faults in the collector (or here).
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            # Populated: every page is faulted in now, not on the step that
            # first reaches it (a page fault is a trip into the kernel).
            self.mm = mmap.mmap(fd, HEADER_BYTES + capacity,
                                flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
            self.ring_id = int.from_bytes(os.urandom(8), "little") or 1
            HEAD.pack_into(self.mm, 0, MAGIC, VERSION, 0, HEADER_BYTES, capacity, os.getpid(), 0,
                           self.ring_id)
            self.q = memoryview(self.mm).cast("Q")
            # The pipe's write end stays here; the receiver polls the read
            # end and sees it close when this process is gone.
            self.pipe = os.pipe()
        except Exception:
            self.close()
            raise
        self.cap = capacity
        self.mask = capacity - 1
        self.w = self.r = self.records = 0
        self.beat = 0
        self.check_at = 0
        self.unanswered = 0
        self.woken = 0
        self.control = CONTROL.pack(MAGIC, VERSION, KIND_WAKE, 0, self.ring_id)
        _rings.add(self)

    def announce(self):
        """Hands the ring to the receiver; True when the datagram went out."""
        msg = CONTROL.pack(MAGIC, VERSION, KIND_ANNOUNCE, 0, self.ring_id)
        return self.sender.send_fds(msg, (self.fd, self.pipe[0]))

    def room(self, n):
        """Whether n more bytes fit, after re-reading the reader's index."""
        r = self.r = self.q[W_READ]
        return self.w + n - r <= self.cap

    def put(self, rec):
        """Copies rec at the write position, wrapping at the end. The caller
        checked room and publishes the write index."""
        n = len(rec)
        pos = self.w & self.mask
        end = pos + n
        if end <= self.cap:
            self.mm[HEADER_BYTES + pos:HEADER_BYTES + end] = rec
        else:
            k = self.cap - pos
            self.mm[HEADER_BYTES + pos:HEADER_BYTES + self.cap] = rec[:k]
            self.mm[HEADER_BYTES:HEADER_BYTES + n - k] = rec[k:]

    def write(self, rec):
        """Writes one record (frame included); False when the ring is full.
        The slow-path twin of the emitter's inlined write."""
        n = len(rec)
        if self.w + n - self.r > self.cap and not self.room(n):
            return False
        self.put(rec)
        self.w += n
        self.records += 1
        self.q[W_WRITE] = self.w  # publishes the record: stored after its bytes
        return True

    def wake(self, sleep):
        """Sends one wake datagram per sleep of the reader."""
        if sleep != self.woken:
            self.woken = sleep
            self.sender.send_control(self.control)

    def check(self, now_ns):
        """Once a second: announces the ring again if the reader stood still
        (a restarted collector does not know it). Returns False when the
        ring should be given up: announced MAX_UNANSWERED times and never
        read."""
        self.check_at = now_ns + CHECK_NS
        beat = self.q[W_BEAT]
        if beat != self.beat:
            self.beat = beat
            self.unanswered = 0
            return True
        if self.announce():
            self.unanswered += 1
        return self.unanswered < MAX_UNANSWERED or beat != 0

    def unread_records(self):
        """Records written that no reader has consumed."""
        return max(0, self.records - self.q[W_READ_RECORDS])

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    def close(self):
        """Unmaps and closes; the receiver keeps its own mapping."""
        q, self.q = self.q, None
        if q is not None:
            q.release()
        mm, self.mm = self.mm, None
        if mm is not None:
            mm.close()
        for fd in (self.fd,) + tuple(self.pipe):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd, self.pipe = -1, (-1, -1)


def announce_unread_at_exit():
    """At exit, hands every ring that still holds unread records to the
    receiver once more: a collector that restarted while this process ran
    and has not heard of its ring yet gets it now, and the descriptors in
    flight keep the memory alive after this process is gone. A receiver
    that holds the ring already ignores the announcement."""
    for r in list(_rings):
        try:
            if r.q is not None and r.q[W_READ] != r.w:
                r.announce()
        except Exception:
            pass


atexit.register(announce_unread_at_exit)


def close_all_after_fork():
    """In a forked child: the parent's rings are not the child's to write.
    Closing them here also closes the child's copy of each pipe's write end,
    so the receiver still sees the parent's exit."""
    for r in list(_rings):
        r.close()
    _rings.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=close_all_after_fork)


def supported():
    return hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS") and hasattr(socket, "SCM_RIGHTS")


class Reader:
    """A reader of rings and step datagrams on one socket, as the
    engine_step receiver reads them; for tests and tools, never used by the
    hook. decode turns each record's bytes into what the caller wants."""

    def __init__(self, path, decode=bytes):
        self.path = path
        self.decode = decode
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)
        self.rings = {}  # ring id -> [mm, q, capacity, memfd, pipe read end]
        self.wakes = 0
        self.beat = 0

    def poll(self):
        """Reads every queued datagram and every ring record; returns the
        decoded records in arrival order (per ring, in ring order)."""
        out = []
        while True:
            try:
                data, anc, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(8 * 4))
            except BlockingIOError:
                break
            fds = array.array("i")
            for level, typ, payload in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
            if data[:4] == MAGIC:
                _, _, kind, _, rid = CONTROL.unpack_from(data)
                if kind == KIND_ANNOUNCE and len(fds) == 2 and rid not in self.rings:
                    self._attach(rid, fds[0], fds[1])
                    continue
                if kind == KIND_WAKE:
                    self.wakes += 1
            else:
                out.append(self.decode(data))
            for fd in fds:
                os.close(fd)
        for rid in list(self.rings):
            out += self._drain(rid)
        return out

    def _attach(self, rid, fd, pipe):
        size = os.fstat(fd).st_size
        mm = mmap.mmap(fd, size)
        _, _, _, hdr, cap, _, _, got = HEAD.unpack_from(mm, 0)
        if got != rid or hdr != HEADER_BYTES or hdr + cap != size:
            mm.close()
            os.close(fd)
            os.close(pipe)
            return
        self.rings[rid] = [mm, memoryview(mm).cast("Q"), cap, fd, pipe]

    def _drain(self, rid):
        mm, q, cap, _, _ = self.rings[rid]
        out = []
        w, r = q[W_WRITE], q[W_READ]
        n_read = q[W_READ_RECORDS]
        while r < w:
            (n,) = FRAME.unpack(self._copy(mm, cap, r, 4))
            out.append(self.decode(self._copy(mm, cap, r + 4, n)))
            r += 4 + n
            n_read += 1
        q[W_READ] = r
        q[W_READ_RECORDS] = n_read
        self.beat += 1
        q[W_BEAT] = self.beat
        return out

    @staticmethod
    def _copy(mm, cap, at, n):
        pos = at & (cap - 1)
        if pos + n <= cap:
            return bytes(mm[HEADER_BYTES + pos:HEADER_BYTES + pos + n])
        k = cap - pos
        return bytes(mm[HEADER_BYTES + pos:HEADER_BYTES + cap]) + bytes(mm[HEADER_BYTES:HEADER_BYTES + n - k])

    def sleep(self, gen):
        """Marks every ring as sleeping with generation gen (odd)."""
        for ring in self.rings.values():
            ring[1][W_SLEEP] = gen

    def close(self):
        for mm, q, _, fd, pipe in self.rings.values():
            q.release()
            mm.close()
            os.close(fd)
            os.close(pipe)
        self.rings.clear()
        self.sock.close()

