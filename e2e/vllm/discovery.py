# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""make e2e-vllm-discovery: the real vLLM, started by hand, found by the overlay.

The collector runs on config/default.yaml + config/engine-discovery.yaml. One
plain `vllm serve` of the tiny model (no inferprof-run), N requests, then:
  - the scraped vllm:time_to_first_token_seconds count under the observer's
    identity (service.instance.id = 127.0.0.1:PORT, the API server's
    process.pid, service.name vllm) equals N and vLLM's own /metrics;
  - exactly one receiver was started for the engine's processes, on the API
    port: not on any other socket they listen on, and not for the EngineCore
    process (vLLM retitles it, VLLM::EngineCore).
Writes the logs under --work; exit status 1 when a check fails. Standard
library only; run with the e2e venv's python.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from run import MODEL, descendants, engine_env, free_port, get, serve_args, wait_http  # noqa: E402

REQUESTS = 5


def listening(pids):
    """host:port of each TCP socket the processes listen on, from /proc/net (as the observer reads it)."""
    ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return sorted({line.split()[3] for line in ss.splitlines() if any(f"pid={p}," in line for p in pids)})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--venv", required=True)
    p.add_argument("--work", default="")
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="inferprof-e2e-vllm-discovery-")
    data = os.path.join(work, "data")
    os.makedirs(data, mode=0o700, exist_ok=True)
    model = os.path.join(work, MODEL)
    subprocess.run([os.path.join(args.venv, "bin", "python"), os.path.join(HERE, "make_model.py"), model],
                   check=True, stdout=subprocess.DEVNULL)
    ports = {k: free_port() for k in ("grpc", "http", "health", "prom", "tel", "gs", "ui", "vllm")}
    cenv = dict(os.environ,
                INFERPROF_OTLP_GRPC_ENDPOINT=f"127.0.0.1:{ports['grpc']}",
                INFERPROF_OTLP_HTTP_ENDPOINT=f"127.0.0.1:{ports['http']}",
                INFERPROF_HEALTH_ENDPOINT=f"127.0.0.1:{ports['health']}",
                INFERPROF_PROMETHEUS_ENDPOINT=f"127.0.0.1:{ports['prom']}",
                INFERPROF_TELEMETRY_PORT=str(ports["tel"]),
                INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT=f"127.0.0.1:{ports['gs']}",
                INFERPROF_UI_ENDPOINT=f"127.0.0.1:{ports['ui']}",
                INFERPROF_DATA_DIR=data, INFERPROF_ENGINE_TARGETS_DIR=os.path.join(data, "engines"),
                INFERPROF_CUPTI_ENDPOINT=os.path.join(data, "cupti.sock"),
                INFERPROF_STEP_ENDPOINT=os.path.join(data, "step.sock"),
                INFERPROF_ENGINE_DISCOVERY_INTERVAL="1s", INFERPROF_ENGINE_SCRAPE_INTERVAL="1s")
    col_log = os.path.join(work, "collector.log")
    col = subprocess.Popen([os.path.join(ROOT, "bin", "otelcol-inferprof"),
                            "--feature-gates=confmap.enableMergeAppendOption",
                            "--config", os.path.join(ROOT, "config", "default.yaml"),
                            "--config", os.path.join(ROOT, "config", "engine-discovery.yaml")],
                           env=cenv, stdout=open(col_log, "w"), stderr=subprocess.STDOUT)
    port = ports["vllm"]
    eng = subprocess.Popen(serve_args(model, port), env=engine_env(args.venv),
                           stdout=open(os.path.join(work, "engine.log"), "w"), stderr=subprocess.STDOUT)
    failures = []
    try:
        wait_http(f"http://127.0.0.1:{ports['health']}/", col, 60, "the collector")
        wait_http(f"http://127.0.0.1:{port}/health", eng, 600, "vLLM")
        # Not a one-token prompt: vLLM 0.32's CPU worker dies of SIGILL
        # (exit code -4) when a fresh engine's first request is one token
        # long, on the development machine (AVX-512 and AMX), while a first
        # request of 60 tokens and every request after it are served
        # (docs/compatibility.md).
        body = json.dumps({"model": MODEL, "prompt": " ".join(["hello"] * 64), "max_tokens": 4}).encode()
        for _ in range(REQUESTS):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                         {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=120).read()
        own = re.search(r"^vllm:time_to_first_token_seconds_count\{[^}]*\} (\S+)$",
                        get(f"http://127.0.0.1:{port}/metrics"), re.M)
        want = f'service_instance_id="127.0.0.1:{port}"'
        scraped = None
        deadline = time.time() + 60
        while time.time() < deadline:
            for line in get(f"http://127.0.0.1:{ports['prom']}/metrics").splitlines():
                if line.startswith("vllm:time_to_first_token_seconds_count{") and want in line:
                    scraped = line
            if scraped and float(scraped.rsplit(" ", 1)[1]) == REQUESTS:
                break
            time.sleep(1)
        print("vLLM's own:", own and own.group(0))
        print("scraped:   ", scraped)
        if not own or float(own.group(1)) != REQUESTS:
            failures.append(f"vLLM's own TTFT count is not {REQUESTS}")
        if not scraped or float(scraped.rsplit(" ", 1)[1]) != REQUESTS:
            failures.append(f"the scraped TTFT count is not {REQUESTS}")
        for label in (f'process_pid="{eng.pid}"', 'service_name="vllm"', 'host_name="'):
            if scraped and label not in scraped:
                failures.append(f"the scraped series lacks {label}")
        pids = [str(eng.pid)] + descendants(eng.pid)
        titles = {x: open(f"/proc/{x}/cmdline").read().replace("\0", " ").strip()[:60] for x in pids}
        print("engine processes:", titles)
        print("engine listening:", listening(pids))
        started = [re.search(r'"endpoint_id": "([^"]+)"', line).group(1) for line in open(col_log)
                   if "starting receiver" in line and any(f'-TCP-{x}"' in line for x in pids)]
        print("receivers started:", started)
        if started != [f"(host_observer)127.0.0.1-{port}-TCP-{eng.pid}"]:
            failures.append(f"expected one receiver, on the API port {port} of pid {eng.pid}: {started}")
    finally:
        eng.terminate()
        eng.wait(60)
        col.terminate()
        col.wait(30)
    print(f"work: {work}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
