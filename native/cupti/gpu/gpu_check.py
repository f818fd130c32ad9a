# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""GPU check of libinferprof_cupti.so (make gpu-check / make gpu-overhead).

check: runs torch.cuda._sleep kernels (one launch = exactly one kernel, so the
launch count is the ground truth) eagerly and inside a CUDA graph, with the
injection library loaded, reads the library's stream on a socket of its own
(docs/cupti-wire.md) and compares kernel counts with the launch counts, and the
GPU time CUPTI gives the eager kernels (first start to last end) with the
cudaEvent time of the same kernels, within TIME_REL_TOL / TIME_ABS_TOL_MS;
either mismatch fails. Run once per graph mode:
  node:  eager + graph-node kernels arrive one by one, with graph ids;
  graph: eager kernels one by one, each graph replay as one graph record.
overhead: times a decode-like loop of small kernels (64 per step, then a
synchronize); overhead-compare runs it without and with the library,
alternating, and prints the overhead in % of step time.
Needs a GPU and PyTorch; make test runs only the CPU helpers' tests
(test_gpu_check.py: the stream decoder against the C encoder, the window and
the tolerance)."""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

MAGIC = 0x55435049
FRAME_HELLO, FRAME_STRING, FRAME_RECORDS, FRAME_STATS, FRAME_RECORDS2, FRAME_CLOCK = 1, 2, 3, 4, 5, 7
KIND_KERNEL, KIND_GRAPH = 1, 5

# The eager kernels' GPU time from CUPTI (first start to last end of the same
# kernels) may differ from cudaEvent's by this much: the events are recorded on
# the same stream right around them, so what separates the two is the event
# boundaries (a few us) and the CUPTI-to-wall offset, which the library may
# re-sample once inside the window (twice its error, from the clock frame).
TIME_REL_TOL = 0.02
TIME_ABS_TOL_MS = 0.05


def new_stream_state():
    return {"names": {}, "kernels": 0, "graph_kernels": 0, "graphs": 0, "flags": 0, "stats": (),
            "eager": [], "clock_error_ns": 0}


def decode(buf, st, kernel_name="spin_kernel"):
    """Consumes the whole frames at the start of buf (docs/cupti-wire.md)
    into st and returns the rest. Kernels whose name contains kernel_name
    are counted; those outside any graph keep their (start, end) in
    st["eager"]."""
    names = st["names"]
    while len(buf) >= 12:
        magic, ver, typ, _, length = struct.unpack_from("<IBBHI", buf)
        if magic != MAGIC:
            raise ValueError("bad frame magic %#x" % magic)
        if len(buf) < 12 + length:
            break
        p = buf[12 : 12 + length]
        buf = buf[12 + length :]
        if typ == FRAME_HELLO:
            st["flags"] = struct.unpack_from("<I", p, 4)[0]
        elif typ == FRAME_STRING:
            sid, n = struct.unpack_from("<IH", p)
            names[sid] = p[6 : 6 + n].decode(errors="replace")
        elif typ in (FRAME_RECORDS, FRAME_RECORDS2):
            size, off = (48, 0) if typ == FRAME_RECORDS else (struct.unpack_from("<H", p)[0], 4)
            for i in range(off, len(p), size):
                kind, _, _, _, start, end, name = struct.unpack_from("<BBHIQQI", p, i)
                graph = struct.unpack_from("<I", p, i + 40)[0]
                if kind == KIND_KERNEL and kernel_name in names.get(name, ""):
                    st["kernels"] += 1
                    if graph:
                        st["graph_kernels"] += 1
                    else:
                        st["eager"].append((start, end))
                elif kind == KIND_GRAPH:
                    st["graphs"] += 1
        elif typ == FRAME_STATS:
            st["stats"] = struct.unpack_from("<%dQ" % (length // 8), p)
        elif typ == FRAME_CLOCK:
            st["clock_error_ns"] = max(st["clock_error_ns"], struct.unpack_from("<Q", p, 8)[0])
    return buf


def read_stream(conn, st, kernel_name="spin_kernel"):
    buf = b""
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        buf = decode(buf + chunk, st, kernel_name)


def eager_window(spans, skip, count):
    """The GPU time of the count kernels that follow the first skip ones (in
    start order) outside graphs: (first start to last end, sum of durations),
    in ns. None when fewer arrived."""
    spans = sorted(spans)[skip : skip + count]
    if len(spans) < count or count == 0:
        return None
    return max(e for _, e in spans) - spans[0][0], sum(e - s for s, e in spans)


def within(cupti_ms, event_ms, clock_error_ms=0.0):
    """Whether CUPTI's and cudaEvent's times of the same kernels agree within
    the stated tolerance; returns (ok, allowed_ms)."""
    allowed = max(TIME_REL_TOL * event_ms, TIME_ABS_TOL_MS) + 2 * clock_error_ms
    return abs(cupti_ms - event_ms) <= allowed, allowed


def child(mode, eager, replays, per_graph):
    import torch

    torch.cuda.init()
    cycles = 200000
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # warm up: one kernel, counted below
    torch.cuda.synchronize()
    start.record()
    for _ in range(eager):
        torch.cuda._sleep(cycles)
    stop.record()
    torch.cuda.synchronize()
    eager_ms = start.elapsed_time(stop)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            for _ in range(per_graph):
                torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize()
    print("eager_ms=%.6f" % eager_ms, flush=True)


def check(lib, mode):
    eager, replays, per_graph = 200, 50, 8
    d = tempfile.mkdtemp()
    path = os.path.join(d, "c.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)
    st = new_stream_state()
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, INFERPROF_CUPTI_ENDPOINT=path, INFERPROF_CUPTI_GRAPH_MODE=mode)
    proc = subprocess.Popen([sys.executable, __file__, "child", mode, str(eager), str(replays), str(per_graph)],
                            env=env, stdout=subprocess.PIPE, text=True)
    ls.settimeout(120)
    conn, _ = ls.accept()
    t = threading.Thread(target=read_stream, args=(conn, st))
    t.start()
    stdout, _ = proc.communicate(timeout=300)
    t.join(timeout=30)
    event_ms = float(stdout.strip().split("=")[1])
    graph_launched = replays * per_graph
    if mode == "node":
        want_kernels, want_graphs = 1 + eager + graph_launched, 0
    else:
        want_kernels, want_graphs = 1 + eager, replays
    counts_ok = st["kernels"] == want_kernels and st["graphs"] >= want_graphs and len(st["eager"]) == 1 + eager
    print("mode=%s kernels=%d (launched %d) eager=%d graph_kernels=%d graph_records=%d (replays %d) flags=%#x stats=%s"
          % (mode, st["kernels"], want_kernels, len(st["eager"]), st["graph_kernels"], st["graphs"], replays,
             st["flags"], st["stats"]))
    # Like for like: the same eager kernels (after the warm-up one) that the
    # cudaEvent pair brackets, neither the warm-up nor graph kernels.
    w = eager_window(st["eager"], 1, eager)
    time_ok = False
    if w is None:
        print("mode=%s eager GPU time: fewer than %d eager kernels after the warm-up arrived" % (mode, eager))
    else:
        span_ms, busy_ms = w[0] / 1e6, w[1] / 1e6
        time_ok, allowed = within(span_ms, event_ms, st["clock_error_ns"] / 1e6)
        print("mode=%s eager GPU time of the same %d kernels: CUPTI first start to last end %.3f ms (busy %.3f ms), "
              "cudaEvent %.3f ms, difference %.3f ms, allowed %.3f ms (%.0f%% or %.2f ms, + 2 x clock error %.3f ms)"
              % (mode, eager, span_ms, busy_ms, event_ms, span_ms - event_ms, allowed, TIME_REL_TOL * 100,
                 TIME_ABS_TOL_MS, st["clock_error_ns"] / 1e6))
    ok = counts_ok and time_ok
    print("mode=%s %s" % (mode, "ok" if ok else "MISMATCH (%s)" % ", ".join(
        x for x, bad in (("kernel counts", not counts_ok), ("GPU time", not time_ok)) if bad)))
    return ok


def overhead(steps=2000, kernels_per_step=64):
    """One decode-like step is kernels_per_step small elementwise kernels
    (about 2-5 us each on a recent GPU) and a synchronize, as a decode step
    of a small model launches; prints the mean step time."""
    import torch

    x = torch.ones(4096, device="cuda")
    y = torch.ones(4096, device="cuda")

    def step():
        for i in range(kernels_per_step // 2):
            x.add_(y)
            y.mul_(0.999)
        torch.cuda.synchronize()

    for _ in range(100):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    injected = "yes" if os.environ.get("CUDA_INJECTION64_PATH") else "no"
    print("injected=%s step_us=%.2f us_per_launch=%.3f" % (injected, dt / steps * 1e6, dt / steps / kernels_per_step * 1e6))
    return dt / steps


def overhead_compare(lib, rounds=5):
    """Runs the step loop without and with the library, alternating, in
    fresh processes, and prints the overhead in % of step time (median)."""
    base, with_lib = [], []
    for _ in range(rounds):
        for env, out in ((None, base), (lib, with_lib)):
            e = dict(os.environ)
            e.pop("CUDA_INJECTION64_PATH", None)
            if env:
                e["CUDA_INJECTION64_PATH"] = env
                e.setdefault("INFERPROF_CUPTI_ENDPOINT", "/tmp/inferprof/gpu-overhead.sock")
            r = subprocess.run([sys.executable, __file__, "overhead"], env=e, capture_output=True, text=True, check=True)
            line = r.stdout.strip().splitlines()[-1]
            print(line)
            out.append(float(line.split("step_us=")[1].split()[0]))
    b, w = sorted(base)[len(base) // 2], sorted(with_lib)[len(with_lib) // 2]
    print("step_us without=%.2f with=%.2f overhead=%.2f%% (target < 1%%)" % (b, w, (w - b) / b * 100))


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "check":
        ok = all([check(sys.argv[2], "node"), check(sys.argv[2], "graph")])
        sys.exit(0 if ok else 1)
    elif sys.argv[1] == "overhead":
        overhead()
    elif sys.argv[1] == "overhead-compare":
        overhead_compare(sys.argv[2])
