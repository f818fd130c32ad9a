# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Writes Python-encoded step records and rings for the Go decoder's tests.

  python3 integrations/python/tools/gen_step_fixture.py internal/stepwire/testdata

It runs the real hook on the fake vLLM and SGLang engines (the scenarios of
tests/fakes/drive.py), keeps the bytes the hook hands its socket, and writes
a few interesting datagrams as <name>.bin next to <name>.json, the values
Python's decoder reads from them, and the launch marks of a fake vLLM
executor worker as marks/<name>.bin and .json. The Go test decodes the .bin files and
compares with the .json, so encoder and decoder cannot drift. Older wire
versions live in testdata/v<N>/ and are never regenerated: they are what
older hooks sent.

It also runs the vLLM scenario with the hook writing to a small ring (the
emitter's own write path) while a reader consumes it in part, and writes the
ring's memory as ring/<name>.bin with the records left unread in
ring/<name>.json, and the same ring as FuzzRing seeds.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "fakes")]


class Capture:
    sent = dropped = 0

    def __init__(self):
        self.datagrams = []

    def send(self, data):
        self.datagrams.append(bytes(data))
        self.sent += 1
        return True

    def close(self):
        pass


# What inferprof-run puts in OTEL_RESOURCE_ATTRIBUTES, with a neighbour.
RESOURCE = "deployment.environment=fixture,service.instance.id=5b0e5d2c-3f4a-4c1e-9d7a-2f6b8c1d0e9a"


def main(out):
    os.environ["OTEL_SERVICE_NAME"] = "fixture-svc"
    os.environ["OTEL_RESOURCE_ATTRIBUTES"] = RESOURCE
    import inferprof_hook
    from inferprof_hook import _state, wire

    import drive

    inferprof_hook.install()

    def run(fn):
        _state.reset()
        cap = _state._sender = Capture()
        fn()
        return [(b, wire.decode_mark(b) if b[:4] == wire.MARK_MAGIC else wire.decode(b))
                for b in cap.datagrams]

    def first(steps, pred):
        return next(b for b, d in steps if pred(d))

    got = {}
    va = run(lambda: drive.vllm_scenario(engine_index=1))
    got["vllm_async_prefill"] = first(va, lambda d: d["prefill"] >= 2)
    got["vllm_preempt"] = first(va, lambda d: d["preempted"])
    got["vllm_resumed"] = first(va, lambda d: d["resumed"])
    vs = run(lambda: drive.vllm_scenario(sync=True))
    got["vllm_spec"] = first(vs, lambda d: max(d["request_tokens"] or [0]) > 1)
    sg = run(lambda: drive.sglang_scenario())
    got["sglang_prefill"] = first(sg, lambda d: d["prefill"])
    got["sglang_retract"] = first(sg, lambda d: d["preempted"])

    from sglang.srt.managers import schedule_batch, scheduler

    orig = schedule_batch.ScheduleBatch.prepare_for_extend

    def old_prepare(b):  # an SGLang without extend_num_tokens
        orig(b)
        del b.extend_num_tokens

    schedule_batch.ScheduleBatch.prepare_for_extend = old_prepare
    try:
        dg = run(lambda: scheduler.Scheduler(scheduler.ServerArgs(),
                                             arrivals={1: [scheduler.Req("old-1", 5, 2)]}).run_event_loop())
    finally:
        schedule_batch.ScheduleBatch.prepare_for_extend = orig
    got["sglang_degraded"] = first(dg, lambda d: d["degraded"])

    for name, buf in got.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(buf)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(wire.decode(buf), f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        print("wrote", name, len(buf), "bytes")

    rings(out, drive)
    marks(out, run)


def marks(out, run):
    """Launch marks: the hook in a vLLM executor worker (the fake
    WorkerProc of tests/fakes/vllm/v1/executor/multiproc_executor.py, built
    in this process) sends a hello, then one mark per batch, from its
    execute_model call to the end of its sample_tokens call."""
    import queue

    from inferprof_hook import wire
    from vllm.v1.core.sched.output import CachedRequestData, SchedulerOutput
    from vllm.v1.executor import multiproc_executor as mp

    def worker():
        w = mp.WorkerProc(0, queue.Queue(), queue.Queue(), {"rank": 0})
        so = mp.WorkerSchedulerOutput(SchedulerOutput([], CachedRequestData.make_empty(),
                                                      {"a": 1, "b": 1, "c": 1}, 3, {}, set()))
        w.worker.execute_model(so)
        w.worker.sample_tokens(None)
        w.async_output_queue.put(None)

    got = run(worker)
    os.makedirs(os.path.join(out, "marks"), exist_ok=True)
    bufs = [b for b, _ in got]
    assert len(bufs) == 2, "a hello and one mark for the batch"
    for name, buf in zip(("hello", "batch"), bufs):
        with open(os.path.join(out, "marks", name + ".bin"), "wb") as f:
            f.write(buf)
        with open(os.path.join(out, "marks", name + ".json"), "w") as f:
            json.dump(wire.decode_mark(buf), f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote mark", name, len(buf), "bytes")


def rings(out, drive):
    """Ring images: the vLLM scenario through the emitter's ring path, into
    a 1 KiB ring that a reader consumes in part after every step, so the
    ring wraps and a few records stay unread (one of them across the end)."""
    import tempfile

    from inferprof_hook import _state, emitter, ring, wire

    os.makedirs(os.path.join(out, "ring"), exist_ok=True)
    os.makedirs(os.path.join(out, "fuzz", "FuzzRing"), exist_ok=True)
    cap = 1024
    orig = ring.capacity_from_env
    ring.capacity_from_env = lambda: cap
    made = []
    for keep in range(200, 1000, 40):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "s.sock")
        os.environ[_state.ENV_ENDPOINT] = path
        reader = ring.Reader(path, wire.decode)
        _state.reset()
        emit = emitter.Emitter.emit

        def partly_read(em, *args, **kw):
            ok = emit(em, *args, **kw)
            r = em.ring
            if r is not None:
                reader.poll() if not reader.rings else consume(r.q, cap, keep)
            return ok

        emitter.Emitter.emit = partly_read
        try:
            drive.vllm_scenario()
        finally:
            emitter.Emitter.emit = emit
        rid, (mm, q, _, _, _) = next(iter(reader.rings.items()))
        image = bytes(mm)
        unread = records(image, cap)
        wraps = any(at % cap + 4 + len(b) > cap for at, b in unread)
        reader.close()
        _state.reset()
        if wraps and len(unread) >= 2:
            made.append((keep, image, unread))
            break
    ring.capacity_from_env = orig
    if not made:
        raise SystemExit("no consumption threshold left a record across the ring's end")
    keep, image, unread = made[0]
    name = "vllm_wrapped"
    with open(os.path.join(out, "ring", name + ".bin"), "wb") as f:
        f.write(image)
    with open(os.path.join(out, "ring", name + ".json"), "w") as f:
        json.dump([wire.decode(b) for _, b in unread], f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    print("wrote ring", name, "with", len(unread), "unread records (reader kept", keep, "bytes behind)")
    # FuzzRing's compact form: write index, read index, then the records area.
    seed = image[64:72] + image[128:136] + image[ring.HEADER_BYTES:]
    with open(os.path.join(out, "fuzz", "FuzzRing", name), "w") as f:
        f.write("go test fuzz v1\n[]byte(\"%s\")\n" % "".join("\\x%02x" % c for c in seed))


def consume(q, cap, keep):
    """Consumes whole records from the oldest until at most keep bytes are
    unread, as a reader that fell behind would."""
    from inferprof_hook import ring

    w, r = q[ring.W_WRITE], q[ring.W_READ]
    while w - r > keep:
        (n,) = ring.FRAME.unpack(ring.Reader._copy(q.obj, cap, r, 4))
        r += 4 + n
        q[ring.W_READ_RECORDS] += 1
    q[ring.W_READ] = r


def records(image, cap):
    """The unread records of a ring image: (position, bytes) each."""
    from inferprof_hook import ring

    q = memoryview(image).cast("Q")
    w, r = q[ring.W_WRITE], q[ring.W_READ]
    out = []
    while r < w:
        (n,) = ring.FRAME.unpack(ring.Reader._copy(image, cap, r, 4))
        out.append((r, ring.Reader._copy(image, cap, r + 4, n)))
        r += 4 + n
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
