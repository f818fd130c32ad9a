# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Encoder for the engine step record, wire format version 4, and the
launch mark an executor worker sends.

The layout is specified in docs/step-wire.md; internal/stepwire decodes it in
the collector. Everything is little-endian. The encoder is on the engine's
hot path, so it packs one fixed header with a precompiled struct and appends
cached, length-prefixed request ids. The same bytes travel in a shared-memory
ring (ring.py) or, as the fallback, as one datagram.
"""

import struct

MAGIC = b"IPST"
VERSION = 4

ENGINE_UNKNOWN = 0
ENGINE_VLLM = 1
ENGINE_SGLANG = 2

FLAG_IDS_TRUNCATED = 0x0001
FLAG_KV_USAGE = 0x0002
# The engine lacked something the hook reads (named in the engine's log), so
# some fields of this step are estimates or absent.
FLAG_DEGRADED = 0x0004

# magic, version, engine, flags, pid, engine_index, step, start_ns, end_ns,
# prefill, decode, scheduled_tokens, running, waiting, kv_usage,
# hook_dropped, hook_evicted_ids, n_token_entries, n_preempted, n_resumed,
# batch, n_windows
HEADER = struct.Struct("<4sBBHIIQqqIIIIIfIIHHHQH")
HEADER_SIZE = HEADER.size  # 88, version 4
# Versions 2 and 3 (read by decode only): no batch, no windows.
HEADER_V2 = struct.Struct("<4sBBHIIQqqIIIIIfIIHHH")
# Version 1 (read by decode only): no hook_evicted_ids, no resumed ids.
HEADER_V1 = struct.Struct("<4sBBHIIQqqIIIIIfIHH")
# Short identity strings after the header: service name, engine version,
# host; version 3 adds the service instance id.
IDENTITY_STRINGS = {1: 3, 2: 3, 3: 4, 4: 4}
# A launch window (version 4, after the identity strings, before the token
# entries): start_ns, end_ns, thread id (gettid).
WINDOW = struct.Struct("<qqI")
MAX_WINDOWS = 16
# n windows packed at once, from a flat (start, end, thread, ...) list.
WINDOWS = [struct.Struct("<" + "qqI" * n) for n in range(MAX_WINDOWS + 1)]

# The launch mark an executor worker sends per batch: magic,
# version, engine, flags, pid, ppid, batch, start_ns, end_ns, thread id,
# scheduled tokens, hook_dropped; then host and instance id as short
# strings.
MARK_MAGIC = b"IPLW"
MARK_VERSION = 1
MARK = struct.Struct("<4sBBHIIQqqIII")
MARK_FINAL = 0x0001
# In a ring, each record is preceded by its length (u32).
FRAME = struct.Struct("<I")

# A datagram never exceeds this, so it fits the default Linux socket buffers;
# entries past it are dropped and FLAG_IDS_TRUNCATED is set.
MAX_DATAGRAM = 200 * 1024
MAX_ID_BYTES = 0xFFFF
MAX_SHORT = 0xFF
U32 = 0xFFFFFFFF

_U16 = struct.Struct("<H")
# Token counts 0..63 are the common case (1 without speculative decoding).
_TOKENS = [_U16.pack(n) for n in range(64)]


def short_string(s):
    """Encodes a short identity string (service, version, host): u8 length, bytes."""
    b = (s or "").encode("utf-8", "replace")[:MAX_SHORT]
    return bytes((len(b),)) + b


def identity(service_name, engine_version, host, instance_id=""):
    """The identity block that follows the header, built once per process.

    instance_id is carried whole or not at all: a cut id would name another
    instance. Longer than 255 bytes, it is left out (the caller warns)."""
    iid = (instance_id or "").encode("utf-8", "replace")
    if len(iid) > MAX_SHORT:
        iid = b""
    return (short_string(service_name) + short_string(engine_version) + short_string(host)
            + bytes((len(iid),)) + iid)


def id_bytes(request_id):
    """A request id as it appears on the wire: u16 length, UTF-8 bytes."""
    b = str(request_id).encode("utf-8", "replace")[:MAX_ID_BYTES]
    return _U16.pack(len(b)) + b


def tokens_bytes(n):
    if n < 64:
        return _TOKENS[n]
    return _U16.pack(n if n <= 0xFFFF else 0xFFFF)


def entry(request_id, n=1):
    """One token entry: u16 tokens, u16 id length, id bytes."""
    return tokens_bytes(n) + id_bytes(request_id)


def with_tokens(entry1, n):
    """Re-counts a cached one-token entry to n tokens."""
    return entry1 if n == 1 else tokens_bytes(n) + entry1[2:]


def flat_windows(windows):
    """Launch windows ((start_ns, end_ns, thread id) each) as the flat list
    Emitter.emit takes: at most MAX_WINDOWS, ends clamped to their starts
    (the wall clock can step back), thread ids masked."""
    flat = []
    for a, b, t in windows[:MAX_WINDOWS]:
        flat += (a, b if b >= a else a, t & U32)
    return flat


def windows_bytes(windows):
    """Encodes launch windows ((start_ns, end_ns, thread id) each)."""
    flat = flat_windows(windows)
    return WINDOWS[len(flat) // 3].pack(*flat)


def encode(engine, pid, engine_index, step, start_ns, end_ns, prefill, decode,
           scheduled_tokens, running, waiting, kv_usage, hook_dropped, ident,
           entries, preempted, resumed=(), hook_evicted_ids=0, degraded=False,
           batch=0, windows=()):
    """Returns one datagram.

    entries is a list of encoded token entries (see entry), preempted and
    resumed lists of id_bytes; kv_usage is a float in 0..1 or None when
    unknown; windows a list of (start_ns, end_ns, thread id).
    """
    flags = FLAG_DEGRADED if degraded else 0
    if kv_usage is None or kv_usage != kv_usage:  # unknown, or NaN
        kv = 0.0
    else:
        kv = min(1.0, max(0.0, float(kv_usage)))
        flags |= FLAG_KV_USAGE
    if end_ns < start_ns:
        end_ns = start_ns
    n, m, k = len(entries), len(preempted), len(resumed)
    wins = windows_bytes(windows)
    body = b"".join(entries) + b"".join(preempted) + b"".join(resumed)
    if HEADER_SIZE + len(ident) + len(body) + len(wins) > MAX_DATAGRAM or max(n, m, k) > 0xFFFF:
        body, n, m, k = truncate(MAX_DATAGRAM - HEADER_SIZE - len(ident) - len(wins), entries, preempted,
                                 resumed)
        flags |= FLAG_IDS_TRUNCATED
    # Counts are non-negative and far below 2**32; masking keeps pack from
    # raising on anything odd without a function call per field.
    return b"".join((HEADER.pack(
        MAGIC, VERSION, engine, flags, pid & U32, engine_index & U32,
        step & 0xFFFFFFFFFFFFFFFF, start_ns, end_ns, prefill & U32, decode & U32,
        scheduled_tokens & U32, running & U32, waiting & U32, kv,
        hook_dropped & U32, hook_evicted_ids & U32, n, m, k, batch & 0xFFFFFFFFFFFFFFFF,
        len(wins) // WINDOW.size), ident, wins, body))


def mark_identity(host, instance_id=""):
    """The identity block of a launch mark: host and instance id."""
    iid = (instance_id or "").encode("utf-8", "replace")
    if len(iid) > MAX_SHORT:
        iid = b""
    return short_string(host) + bytes((len(iid),)) + iid


def encode_mark(engine, pid, ppid, batch, start_ns, end_ns, thread_id, scheduled_tokens,
                hook_dropped, ident, final):
    """One launch mark: executor worker pid (child of the engine process
    ppid) launched batch number batch in [start_ns, end_ns] on thread
    thread_id; final says no other mark of this batch follows."""
    if end_ns < start_ns:
        end_ns = start_ns
    return MARK.pack(MARK_MAGIC, MARK_VERSION, engine, MARK_FINAL if final else 0, pid & U32,
                     ppid & U32, batch & 0xFFFFFFFFFFFFFFFF, start_ns, end_ns, thread_id & U32,
                     scheduled_tokens & U32, hook_dropped & U32) + ident


def decode_mark(buf):
    """Decodes a launch mark into a dict; for tests and tools."""
    if len(buf) < MARK.size or buf[:4] != MARK_MAGIC or buf[4] != MARK_VERSION:
        raise ValueError("not a launch mark")
    (_, _, engine, flags, pid, ppid, batch, start_ns, end_ns, tid, sched,
     dropped) = MARK.unpack_from(buf, 0)
    off, strings = MARK.size, []
    for _ in range(2):
        ln = buf[off]
        strings.append(bytes(buf[off + 1:off + 1 + ln]).decode("utf-8"))
        off += 1 + ln
    if off != len(buf):
        raise ValueError("trailing bytes")
    return {"engine": engine, "final": bool(flags & MARK_FINAL), "pid": pid, "ppid": ppid,
            "batch": batch, "start_ns": start_ns, "end_ns": end_ns, "thread_id": tid,
            "scheduled_tokens": sched, "hook_dropped": dropped, "host": strings[0],
            "instance_id": strings[1]}


def prefix(engine):
    """The constant first 6 bytes of every datagram from one engine."""
    return MAGIC + bytes((VERSION, engine))


def head_struct(ident, n_windows=0):
    """A struct that packs a ring record's frame, the header, the identity
    block and n_windows launch windows in one call, for the hook's hot
    path: the record length (see FRAME; the datagram is the record without
    it), the 6-byte prefix (see prefix), the header's other fields, ident,
    then (start_ns, end_ns, thread id) per window."""
    return struct.Struct("<I6s" + HEADER.format[5:] + "%ds" % len(ident) + "qqI" * n_windows)


def truncate(room, entries, *id_lists):
    """Keeps the entries, then the ids of each of id_lists in turn, that fit
    in room bytes.

    Returns the joined bytes and how many of entries and of each id list
    were kept."""
    kept, size, counts = [], 0, []
    for group in (entries,) + id_lists:
        n = 0
        for e in group:
            if size + len(e) > room or n == 0xFFFF:
                break
            kept.append(e)
            size += len(e)
            n += 1
        counts.append(n)
        if n < len(group):
            # Nothing after a cut: the receiver marks the step truncated.
            counts += [0] * (len(id_lists) + 1 - len(counts))
            break
    return (b"".join(kept),) + tuple(counts)


def decode(buf):
    """Decodes a datagram (version 1 to 4) into a dict. Used by tests and
    tools, never by the hook."""
    if len(buf) < HEADER_V1.size:
        raise ValueError("short datagram: %d bytes" % len(buf))
    version = buf[4]
    if buf[:4] != MAGIC or version not in IDENTITY_STRINGS:
        raise ValueError("bad magic or version")
    batch, nw = 0, 0
    if version == 1:
        (_, _, engine, flags, pid, engine_index, step, start_ns, end_ns, prefill, decode_,
         sched, running, waiting, kv, dropped, n, m) = HEADER_V1.unpack_from(buf, 0)
        evicted, k, off = 0, 0, HEADER_V1.size
    elif version < 4:
        if len(buf) < HEADER_V2.size:
            raise ValueError("short datagram: %d bytes" % len(buf))
        (_, _, engine, flags, pid, engine_index, step, start_ns, end_ns, prefill, decode_,
         sched, running, waiting, kv, dropped, evicted, n, m, k) = HEADER_V2.unpack_from(buf, 0)
        off = HEADER_V2.size
    else:
        if len(buf) < HEADER_SIZE:
            raise ValueError("short datagram: %d bytes" % len(buf))
        (_, _, engine, flags, pid, engine_index, step, start_ns, end_ns, prefill, decode_,
         sched, running, waiting, kv, dropped, evicted, n, m, k, batch,
         nw) = HEADER.unpack_from(buf, 0)
        off = HEADER_SIZE
    strings = []
    for _ in range(IDENTITY_STRINGS[version]):
        ln = buf[off]
        strings.append(bytes(buf[off + 1:off + 1 + ln]).decode("utf-8"))
        off += 1 + ln
    # Version 4: the launch windows, fixed-size, before the variable lists.
    windows = []
    for _ in range(nw):
        windows.append(list(WINDOW.unpack_from(buf, off)))
        off += WINDOW.size
    ids, toks = [], []
    for _ in range(n):
        (t,) = _U16.unpack_from(buf, off)
        (ln,) = _U16.unpack_from(buf, off + 2)
        toks.append(t)
        ids.append(bytes(buf[off + 4:off + 4 + ln]).decode("utf-8"))
        off += 4 + ln
    lists = []
    for count in (m, k):
        got = []
        for _ in range(count):
            (ln,) = _U16.unpack_from(buf, off)
            got.append(bytes(buf[off + 2:off + 2 + ln]).decode("utf-8"))
            off += 2 + ln
        lists.append(got)
    if off != len(buf):
        raise ValueError("trailing bytes")
    return {
        "version": version, "engine": engine, "flags": flags, "pid": pid,
        "engine_index": engine_index, "step": step, "start_ns": start_ns, "end_ns": end_ns,
        "prefill": prefill, "decode": decode_, "scheduled_tokens": sched, "running": running,
        "waiting": waiting, "kv_usage": kv if flags & FLAG_KV_USAGE else None,
        "hook_dropped": dropped, "hook_evicted_ids": evicted,
        "degraded": bool(flags & FLAG_DEGRADED), "service_name": strings[0],
        "engine_version": strings[1], "host": strings[2],
        "instance_id": strings[3] if len(strings) > 3 else "", "request_ids": ids,
        "request_tokens": toks, "preempted": lists[0], "resumed": lists[1],
        "batch": batch, "windows": windows,
    }
