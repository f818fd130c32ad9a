# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""GPU check of libinferprof_cupti.so (make gpu-check / make gpu-overhead).

check: runs torch.cuda._sleep kernels (one launch = exactly one kernel, so the
launch count is the ground truth) eagerly and inside a CUDA graph, with the
injection library loaded, reads the library's stream on a socket of its own
(docs/cupti-wire.md) and compares kernel counts and GPU time with the launch
counts and cudaEvent timing. Run once per graph mode:
  node:  eager + graph-node kernels arrive one by one, with graph ids;
  graph: eager kernels one by one, each graph replay as one graph record.
overhead: times a decode-like loop of small kernels (64 per step, then a
synchronize); overhead-compare runs it without and with the library,
alternating, and prints the overhead in % of step time.
Needs a GPU and PyTorch; nothing here runs in make test."""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

MAGIC = 0x55435049


def read_stream(conn, out):
    buf = b""
    names = {}
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 12:
            magic, ver, typ, _, length = struct.unpack_from("<IBBHI", buf)
            if magic != MAGIC or len(buf) < 12 + length:
                break
            p = buf[12 : 12 + length]
            buf = buf[12 + length :]
            if typ == 1:
                out["flags"] = struct.unpack_from("<I", p, 4)[0]
            elif typ == 2:
                sid, n = struct.unpack_from("<IH", p)
                names[sid] = p[6 : 6 + n].decode(errors="replace")
            elif typ in (3, 5):
                size, off = (48, 0) if typ == 3 else (struct.unpack_from("<H", p)[0], 4)
                for i in range(off, len(p), size):
                    kind, _, _, _, start, end, name = struct.unpack_from("<BBHIQQI", p, i)
                    graph = struct.unpack_from("<I", p, i + 40)[0]
                    if kind == 1 and "spin_kernel" in names.get(name, ""):
                        out["kernels"] += 1
                        out["kernel_ns"] += end - start
                        out["graph_kernels"] += 1 if graph else 0
                    elif kind == 5:
                        out["graphs"] += 1
            elif typ == 4:
                out["stats"] = struct.unpack_from("<%dQ" % (length // 8), p)


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
    print("eager_ms=%.3f" % eager_ms, flush=True)


def check(lib, mode):
    eager, replays, per_graph = 200, 50, 8
    d = tempfile.mkdtemp()
    path = os.path.join(d, "c.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)
    out = {"kernels": 0, "kernel_ns": 0, "graph_kernels": 0, "graphs": 0, "flags": 0, "stats": ()}
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, INFERPROF_CUPTI_ENDPOINT=path, INFERPROF_CUPTI_GRAPH_MODE=mode)
    proc = subprocess.Popen([sys.executable, __file__, "child", mode, str(eager), str(replays), str(per_graph)],
                            env=env, stdout=subprocess.PIPE, text=True)
    ls.settimeout(120)
    conn, _ = ls.accept()
    t = threading.Thread(target=read_stream, args=(conn, out))
    t.start()
    stdout, _ = proc.communicate(timeout=300)
    t.join(timeout=30)
    eager_ms = float(stdout.strip().split("=")[1])
    graph_launched = replays * per_graph
    if mode == "node":
        want_kernels, want_graphs = 1 + eager + graph_launched, 0
    else:
        want_kernels, want_graphs = 1 + eager, replays
    ok = out["kernels"] == want_kernels and out["graphs"] >= want_graphs
    print("mode=%s kernels=%d (launched %d) graph_kernels=%d graph_records=%d (replays %d) flags=%#x stats=%s"
          % (mode, out["kernels"], want_kernels, out["graph_kernels"], out["graphs"], replays, out["flags"], out["stats"]))
    print("mode=%s eager GPU time: cudaEvent %.3f ms for %d kernels; CUPTI sum over all %d kernels %.3f ms"
          % (mode, eager_ms, eager, out["kernels"], out["kernel_ns"] / 1e6))
    print("mode=%s %s" % (mode, "ok" if ok else "MISMATCH"))
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
