"""Record a CPU-only PyTorch profiler (Kineto) trace for the cupti receiver's tests.

A tiny MLP runs forward and backward with an optimizer step on the main
thread, under torch.profiler with a schedule, so each step() opens a
ProfilerStep#N annotation; a second thread runs forward passes at the same
time (as an engine's helper thread would), so the trace holds CPU ops of
several threads. No GPU: the trace has CPU ops and annotations, no kernels.

Usage: python make_trace.py OUT.json.gz   (torch from the venv; see README.md)
"""

import gzip
import os
import shutil
import sys
import tempfile
import threading

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def main(out):
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    helper = nn.Linear(32, 32)
    stop = threading.Event()
    started = threading.Event()

    def helper_loop():
        started.set()
        with torch.no_grad():
            while not stop.is_set():
                with record_function("helper_forward"):
                    helper(torch.randn(4, 32))

    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "trace.json")
    # wait 1, warmup 1, then 3 recorded steps: ProfilerStep#2..#4.
    sched = schedule(wait=1, warmup=1, active=3, repeat=1)
    # profile_all_threads: record the helper thread's ops too; by default
    # the profiler records only the thread that enabled it.
    cfg = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, experimental_config=cfg,
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        t = threading.Thread(target=helper_loop, name="helper")
        t.start()
        started.wait()
        for _ in range(5):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            prof.step()
        stop.set()
        t.join()
    with open(path, "rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main(sys.argv[1])
