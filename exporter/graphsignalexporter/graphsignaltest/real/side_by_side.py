# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The tiny CPU vLLM of make e2e-vllm, once under graphsignal-run and once
under inferprof-run, on the same small load; both /signals saved.

    $vllm_venv/bin/python side_by_side.py --vllm-venv V --gs-venv G --out DIR

Each run: the engine (e2e/vllm/run.py's flags and environment), two warm-up
requests, then driver.py at concurrency 4 for 16 requests with the same
seed, then GET /signals. Graphsignal's watcher scrapes vLLM's /metrics
(--metrics-port); inferprof's collector runs config/default.yaml and
scrapes the target inferprof-run writes. Writes DIR/graphsignal.json,
DIR/inferprof.json, DIR/*-client.jsonl, DIR/*.log and DIR/table.md (the
signals each serves, and the values both measure). One run each: the
machine is shared. Run by hand; the table is in docs/graphsignal-exporter.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "e2e", "vllm"))
import run  # noqa: E402  e2e/vllm/run.py: engine flags, env, helpers


def drive(vllm_venv, port, out, concurrency, count, seed):
    subprocess.run([os.path.join(vllm_venv, "bin", "python"), os.path.join(ROOT, "e2e", "vllm", "driver.py"),
                    "--base-url", f"http://127.0.0.1:{port}/v1", "--model", run.MODEL, "--out", out,
                    "--concurrency", str(concurrency), "--requests-per-level", str(count), "--seed", str(seed)],
                   check=True, stdin=subprocess.DEVNULL)


def load(args, port, name):
    drive(args.vllm_venv, port, os.path.join(args.out, f"{name}-warmup.jsonl"), 1, 2, 1)
    drive(args.vllm_venv, port, os.path.join(args.out, f"{name}-client.jsonl"), 4, 16, 25)


def graphsignal_side(args, model_dir):
    port, listen = run.free_port(), run.free_port()
    env = run.engine_env(args.vllm_venv)
    env["GRAPHSIGNAL_DISABLE_VERSION_CHECK"] = "1"  # nothing beyond loopback
    cmd = [os.path.join(args.gs_venv, "bin", "graphsignal-run"), "--listen-port", str(listen),
           "--metrics-port", str(port)] + run.serve_args(model_dir, port)
    log = open(os.path.join(args.out, "graphsignal.log"), "w")
    eng = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        t0 = time.time()
        run.wait_http(f"http://127.0.0.1:{port}/health", eng, args.start_limit, "vLLM under graphsignal-run")
        print(f"side_by_side: graphsignal-run vLLM ready in {time.time() - t0:.0f}s", file=sys.stderr)
        load(args, port, "graphsignal")
        time.sleep(3)  # the watcher ticks every second: two more scrapes
        doc = run.get(f"http://127.0.0.1:{listen}/signals")
        run.save(args.out, "graphsignal-vllm-metrics.txt", run.get(f"http://127.0.0.1:{port}/metrics"))
        run.save(args.out, "graphsignal.json", doc)
    finally:
        run.stop(eng)
        log.close()


def inferprof_side(args, model_dir):
    ports = {k: run.free_port() for k in ("grpc", "http", "health", "prom", "tel", "gs", "vllm")}
    sock = tempfile.mkdtemp(prefix="ip-", dir="/tmp")
    d = os.path.join(args.out, "inferprof-data")
    os.makedirs(d, exist_ok=True)
    col_env = dict(os.environ)
    col_env.update({
        "INFERPROF_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{ports['grpc']}",
        "INFERPROF_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports['http']}",
        "INFERPROF_HEALTH_ENDPOINT": f"127.0.0.1:{ports['health']}",
        "INFERPROF_PROMETHEUS_ENDPOINT": f"127.0.0.1:{ports['prom']}",
        "INFERPROF_TELEMETRY_PORT": str(ports["tel"]),
        "INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT": f"127.0.0.1:{ports['gs']}",
        "INFERPROF_STEP_ENDPOINT": os.path.join(sock, "step.sock"),
        "INFERPROF_CUPTI_ENDPOINT": os.path.join(sock, "cupti.sock"),
        "INFERPROF_DATA_DIR": d,
        "INFERPROF_METRICS_FLUSH_INTERVAL": "1s",
        "INFERPROF_ENGINE_TARGETS_DIR": os.path.join(d, "engines"),
        "INFERPROF_ENGINE_SCRAPE_INTERVAL": "1s",
    })
    col_log = open(os.path.join(args.out, "collector.log"), "w")
    col = subprocess.Popen([os.path.join(ROOT, "bin", "otelcol-inferprof"), "--config",
                            os.path.join(ROOT, "config", "default.yaml")],
                           env=col_env, stdout=col_log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    eng = None
    try:
        run.wait_http(f"http://127.0.0.1:{ports['health']}/", col, 60, "collector")
        extra = {k: col_env[k] for k in ("INFERPROF_STEP_ENDPOINT", "INFERPROF_ENGINE_TARGETS_DIR")}
        log = open(os.path.join(args.out, "inferprof.log"), "w")
        t0 = time.time()
        eng = run.start_engine(os.path.join(ROOT, "bin"), args.vllm_venv, model_dir, ports["vllm"],
                               f"http://127.0.0.1:{ports['grpc']}", log, extra_env=extra)
        run.wait_http(f"http://127.0.0.1:{ports['vllm']}/health", eng, args.start_limit, "vLLM under inferprof-run")
        print(f"side_by_side: inferprof-run vLLM ready in {time.time() - t0:.0f}s", file=sys.stderr)
        load(args, ports["vllm"], "inferprof")
        time.sleep(8)  # vLLM's span batches (5 s), a connector flush, a scrape
        run.save(args.out, "inferprof-vllm-metrics.txt", run.get(f"http://127.0.0.1:{ports['vllm']}/metrics"))
        run.save(args.out, "inferprof.json", run.get(f"http://127.0.0.1:{ports['gs']}/signals"))
    finally:
        if eng is not None:
            run.stop(eng)
        run.stop(col)
        col_log.close()


def stat_line(m):
    s = m["stats"]
    if m["type"] == "gauge":
        return f"value {s['value']:g}"
    if m["type"] == "counter":
        return f"total {s['total']:g}"
    if m["type"] == "histogram":
        return f"count {s['count']}, sum {s['sum']:.4g}"
    return f"{len(s['frames'])} frames"


def table(out):
    docs = {}
    for side in ("graphsignal", "inferprof"):
        p = os.path.join(out, f"{side}.json")
        docs[side] = json.load(open(p)) if os.path.exists(p) else None
    series = {}
    for side, doc in docs.items():
        for m in (doc or {}).get("metrics", []):
            key = (m["name"], m["type"])
            # Sum a name's series (engine, model, finished_reason labels).
            prev = series.setdefault(key, {}).get(side)
            series[key][side] = stat_line(m) if prev is None else prev + "; " + stat_line(m)
    lines = ["| signal | type | graphsignal-run | inferprof-run |", "|---|---|---|---|"]
    for (name, typ), v in sorted(series.items()):
        lines.append(f"| `{name}` | {typ} | {v.get('graphsignal', '—')} | {v.get('inferprof', '—')} |")
    for side, doc in docs.items():
        if doc:
            lines.append(f"\n{side}: {len(doc['metrics'])} series, {len(doc['errors'])} errors, "
                         f"resources {sorted(r['kind'] for r in doc['resources'])}")
    text = "\n".join(lines) + "\n"
    run.save(out, "table.md", text)
    print(text)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vllm-venv", required=True)
    p.add_argument("--gs-venv", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--start-limit", type=int, default=900)
    p.add_argument("--sides", default="graphsignal,inferprof")
    p.add_argument("--table-only", action="store_true")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if not args.table_only:
        model_dir = os.path.join(args.out, run.MODEL)
        if not os.path.exists(model_dir):
            subprocess.run([os.path.join(args.vllm_venv, "bin", "python"),
                            os.path.join(ROOT, "e2e", "vllm", "make_model.py"), model_dir],
                           check=True, stdout=subprocess.DEVNULL)
        for side in args.sides.split(","):
            {"graphsignal": graphsignal_side, "inferprof": inferprof_side}[side](args, model_dir)
    table(args.out)


if __name__ == "__main__":
    main()
