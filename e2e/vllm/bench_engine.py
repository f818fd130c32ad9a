# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""make bench-engine: what being profiled costs vLLM.

Two vLLM servers on the same tiny model, started once and side by side:
`bin/inferprof-run vllm serve` (the step hook on, sending to a running
collector) and plain `vllm serve`. The same load (driver.py --bench:
concurrency 32, 64 requests of 32 output tokens) goes to one, then the
other, alternating which goes first, RUNS times each. Neither has
--otlp-traces-endpoint: the difference measured is inferprof's, not vLLM's
own tracing. Prints output tokens/s and TTFT p50 per run, the medians, the
ratio and the run-to-run spread. A benchmark, not a test: it fails only when
a run fails.

Usage: python bench_engine.py --venv DIR [--runs 4] [--out FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import analyze
import run

LEVEL, COUNT = "32", "64"


def one_load(venv, port, out, seed):
    t0 = time.time()
    subprocess.run([os.path.join(venv, "bin", "python"), os.path.join(run.HERE, "driver.py"),
                    "--base-url", f"http://127.0.0.1:{port}/v1", "--model", run.MODEL, "--out", out,
                    "--concurrency", LEVEL, "--requests-per-level", COUNT, "--bench", "--seed", str(seed)],
                   check=True, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recs = analyze.read_jsonl(out)
    wall = max(r["end"] for r in recs) - min(r["send"] for r in recs)
    toks = sum((r["usage"] or {}).get("completion_tokens", 0) for r in recs)
    ttft = statistics.median(r["chunks"][0] - r["send"] for r in recs if r["chunks"])
    return {"tokens_per_s": toks / wall, "ttft_p50_s": ttft, "tokens": toks, "wall_s": wall,
            "elapsed_s": time.time() - t0}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--venv", required=True)
    p.add_argument("--bindir", default=os.path.join(run.ROOT, "bin"))
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--out", default="")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="inferprof-bench-engine-")
    model_dir = os.path.join(work, run.MODEL)
    subprocess.run([os.path.join(args.venv, "bin", "python"), os.path.join(run.HERE, "make_model.py"), model_dir],
                   check=True, stdout=subprocess.DEVNULL)
    sock = tempfile.mkdtemp(prefix="ip-", dir="/tmp")
    step = os.path.join(sock, "step.sock")
    col_env = dict(os.environ)
    ports = {k: run.free_port() for k in ("grpc", "http", "health", "prom", "tel", "gs", "ui", "hooked", "plain")}
    col_env.update({
        "INFERPROF_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{ports['grpc']}",
        "INFERPROF_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports['http']}",
        "INFERPROF_HEALTH_ENDPOINT": f"127.0.0.1:{ports['health']}",
        "INFERPROF_PROMETHEUS_ENDPOINT": f"127.0.0.1:{ports['prom']}",
        "INFERPROF_TELEMETRY_PORT": str(ports["tel"]),
        "INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT": f"127.0.0.1:{ports['gs']}",
        "INFERPROF_UI_ENDPOINT": f"127.0.0.1:{ports['ui']}",
        "INFERPROF_STEP_ENDPOINT": step, "INFERPROF_CUPTI_ENDPOINT": os.path.join(sock, "cupti.sock"),
        "INFERPROF_DATA_DIR": work,
    })
    logs = {k: open(os.path.join(work, k + ".log"), "w") for k in ("collector", "hooked", "plain")}
    col = subprocess.Popen([os.path.join(args.bindir, "otelcol-inferprof"), "--config",
                            os.path.join(run.ROOT, "config", "default.yaml")], env=col_env,
                           stdout=logs["collector"], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           start_new_session=True)
    engines = {}
    try:
        run.wait_http(f"http://127.0.0.1:{ports['health']}/", col, 60, "collector")
        engines["hooked"] = run.start_engine(args.bindir, args.venv, model_dir, ports["hooked"], None,
                                             logs["hooked"], extra_env={"INFERPROF_STEP_ENDPOINT": step})
        engines["plain"] = run.start_engine(args.bindir, args.venv, model_dir, ports["plain"], None,
                                            logs["plain"], hook=None)
        for k, e in engines.items():
            run.wait_http(f"http://127.0.0.1:{ports[k]}/health", e, 900, f"vLLM ({k})")
        # One warm-up load each, not counted.
        for k in engines:
            one_load(args.venv, ports[k], os.path.join(work, f"warm-{k}.jsonl"), 1)
        results = {"hooked": [], "plain": []}
        for i in range(args.runs):
            order = ("hooked", "plain") if i % 2 == 0 else ("plain", "hooked")
            for k in order:
                r = one_load(args.venv, ports[k], os.path.join(work, f"{k}-{i}.jsonl"), 100 + i)
                results[k].append(r)
                print(f"bench-engine: run {i} {k}: {r['tokens_per_s']:.1f} tok/s, TTFT p50 "
                      f"{r['ttft_p50_s'] * 1000:.1f} ms", file=sys.stderr)
        steps = analyze.prom(run.get(f"http://127.0.0.1:{ports['tel']}/metrics"))
    finally:
        for e in engines.values():
            run.stop(e)
        run.stop(col)
    summary = {}
    for k, rs in results.items():
        tps = [r["tokens_per_s"] for r in rs]
        summary[k] = {"tokens_per_s_median": statistics.median(tps), "tokens_per_s_min": min(tps),
                      "tokens_per_s_max": max(tps),
                      "ttft_p50_ms_median": statistics.median(r["ttft_p50_s"] for r in rs) * 1000}
    ratio = summary["hooked"]["tokens_per_s_median"] / summary["plain"]["tokens_per_s_median"]
    spread = max((s["tokens_per_s_max"] - s["tokens_per_s_min"]) / s["tokens_per_s_median"] for s in summary.values())
    received = analyze.prom_sum(steps, "otelcol_receiver_accepted_spans", 'receiver="engine_step"')
    doc = {"vllm": run.vllm_version(args.venv), "cpus": os.cpu_count(), "runs": args.runs,
           "load": f"concurrency {LEVEL}, {COUNT} requests, 32 output tokens each",
           "summary": summary, "hooked_over_plain_tokens_per_s": ratio,
           "spread_max_over_median": spread, "engine_step_spans_received": received, "runs_detail": results}
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    print(f"bench-engine: hooked/plain output tokens/s = {ratio:.4f} ({(ratio - 1) * 100:+.2f}%); "
          f"run-to-run spread up to {spread * 100:.1f}% of the median", file=sys.stderr)


if __name__ == "__main__":
    main()
