# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""make e2e-vllm-starve: do vLLM's CPU spinners starve the rest of the machine?

Starts plain `vllm serve` on the tiny model, then runs rounds of eight
aborted streams (driver.py --abort) while a separate process sleeps 10 ms at
a time and records every wake-up that came more than 0.1 s late: first with
the engine at its default priority, then with run.yield_to_api_server. Prints
a line per round and a JSON summary; measures, asserts nothing (the figures
of make e2e-vllm are the check). docs/compatibility.md quotes it.

Usage: python starve.py --venv DIR [--rounds 4]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402

HEARTBEAT = """
import json, sys, time
late, prev, end = [], time.time(), time.time() + float(sys.argv[1])
while time.time() < end:
    time.sleep(0.01)
    t = time.time()
    if t - prev > 0.1:
        late.append(round(t - prev, 3))
    prev = t
print(json.dumps(late))
"""


def rounds(drive, work, label, n):
    out = []
    for i in range(n):
        hb = subprocess.Popen([sys.executable, "-c", HEARTBEAT, "8"], stdout=subprocess.PIPE, text=True)
        path = os.path.join(work, f"{label}-{i}.jsonl")
        subprocess.run(drive + ["--out", path, "--concurrency", "8", "--requests-per-level", "8",
                                "--abort", "--seed", str(i + 2)], check=True, stderr=subprocess.DEVNULL)
        late = json.loads(hb.communicate()[0])
        recs = run.analyze.read_jsonl(path)
        first = [r["chunks"][0] - r["send"] for r in recs if r["chunks"]]
        row = {"engine": label, "round": i, "heartbeat_late_s": late,
               "first_chunk_max_s": round(max(first, default=float("nan")), 3),
               "errors": sum("error" in r for r in recs)}
        print(json.dumps(row), file=sys.stderr)
        out.append(row)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--venv", required=True)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--bindir", default=os.path.join(run.ROOT, "bin"))
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="inferprof-starve-")
    model_dir = os.path.join(work, run.MODEL)
    subprocess.run([os.path.join(args.venv, "bin", "python"), os.path.join(HERE, "make_model.py"), model_dir],
                   check=True, stdout=subprocess.DEVNULL)
    port = run.free_port()
    eng = run.start_engine(args.bindir, args.venv, model_dir, port, None,
                           open(os.path.join(work, "engine.log"), "w"), hook=None)
    try:
        run.wait_http(f"http://127.0.0.1:{port}/health", eng, 600, "vLLM")
        drive = [os.path.join(args.venv, "bin", "python"), os.path.join(HERE, "driver.py"),
                 "--base-url", f"http://127.0.0.1:{port}/v1", "--model", run.MODEL]
        subprocess.run(drive + ["--out", os.path.join(work, "warmup.jsonl"), "--concurrency", "1",
                                "--requests-per-level", "2", "--seed", "1"], check=True, stderr=subprocess.DEVNULL)
        rows = rounds(drive, work, "default", args.rounds)
        reniced = run.yield_to_api_server(eng.pid)
        rows += rounds(drive, work, "nice19", args.rounds)
    finally:
        run.stop(eng)
    summary = {}
    for label in ("default", "nice19"):
        mine = [r for r in rows if r["engine"] == label]
        summary[label] = {"rounds": len(mine),
                          "rounds_with_a_late_heartbeat": sum(bool(r["heartbeat_late_s"]) for r in mine),
                          "longest_late_s": max((x for r in mine for x in r["heartbeat_late_s"]), default=0),
                          "first_chunk_max_s": max(r["first_chunk_max_s"] for r in mine)}
    summary["threads_reniced"] = reniced
    summary["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
