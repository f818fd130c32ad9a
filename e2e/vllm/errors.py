# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""make e2e-vllm-errors: the real vLLM's errors, through inferprof-run, counted.

The collector runs on config/default.yaml. Two engine starts, the tiny model:
  1. `vllm serve MODEL --no-such-flag`: argparse refuses it; inferprof-run
     exits 2 and the collector counts an `argument` error and an `exit`.
  2. `vllm serve MODEL --enable-log-requests --log-level DEBUG` (0.32 logs the
     prompt at DEBUG only), one request whose prompt holds
     a marker, one whose prompt is longer than the context (vLLM refuses it),
     then `kill -9` of the engine: inferprof-run dies of SIGKILL, the
     collector counts a `signal` error.
The prompt marker must be in none of: Prometheus, /signals, the collector's
output. It does appear in the
engine's own output, which the launcher passes on unchanged; a test that
lacked it there would prove nothing.
Writes the engine and collector logs and a summary under --work; exit status
1 when a check fails. Standard library only; run with the e2e venv's python.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from run import MODEL, engine_env, free_port, get, serve_args, wait_http  # noqa: E402

PROMPT = "ZEPHYR-MARMALADE-PROMPT-4471"


def counts(prom):
    """inferprof_engine_errors_total by kind."""
    out = {}
    for m in re.finditer(r'^inferprof_engine_errors_total\{([^}]*)\} (\S+)$', prom, re.M):
        kind = re.search(r'inferprof_engine_error_kind="([^"]*)"', m.group(1))
        if kind:
            out[kind.group(1)] = out.get(kind.group(1), 0) + float(m.group(2))
    return out


def wait_counts(prom_url, want, limit=60):
    deadline = time.time() + limit
    got = {}
    while time.time() < deadline:
        try:
            got = counts(get(prom_url))
        except OSError:
            pass
        if all(got.get(k, 0) >= v for k, v in want.items()):
            return got
        time.sleep(0.5)
    return got


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def bad_flag(args, launcher, model_dir, ports, env, work, prom_url, summary, check):
    t0 = time.time()
    bad = subprocess.run(launcher + serve_args(model_dir, ports["vllm"]) + ["--no-such-flag"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)
    out = bad.stdout.decode(errors="replace")
    open(os.path.join(work, "engine-bad-flag.log"), "w").write(out)
    summary["bad_flag"] = {"exit": bad.returncode, "seconds": round(time.time() - t0, 1)}
    check(bad.returncode == 2, f"bad flag: exit code {bad.returncode}, want 2")
    check("error: unrecognized arguments: --no-such-flag" in out, "bad flag: vLLM's argparse line passed through")
    got = wait_counts(prom_url, {"argument": 1, "exit": 1})
    summary["after_bad_flag"] = got
    check(got.get("argument", 0) >= 1 and got.get("exit", 0) >= 1, f"bad flag counted as argument and exit: {got}")


def kill(args, launcher, model_dir, ports, env, work, prom_url, col_log_path, summary, check):
    eng_log_path = os.path.join(work, "engine-kill.log")
    t0 = time.time()
    eng = subprocess.Popen(launcher + serve_args(model_dir, ports["vllm"]) + ["--enable-log-requests", "--log-level", "DEBUG"], env=env,
                           stdout=open(eng_log_path, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{ports['vllm']}/health", eng, args.start_limit, "vLLM")
    summary["ready_seconds"] = round(time.time() - t0, 1)
    base = f"http://127.0.0.1:{ports['vllm']}/v1/completions"
    st, _ = post(base, {"model": MODEL, "prompt": PROMPT + " tell me", "max_tokens": 4})
    check(st == 200, f"a request: status {st}")
    st, body = post(base, {"model": MODEL, "prompt": (PROMPT + " ") * 3000, "max_tokens": 4})
    summary["too_long_status"] = st
    check(st == 400, f"a prompt longer than the context is refused: status {st}")
    # The engine is inferprof-run's child (any of its threads forked it,
    # so read every process's parent rather than one thread's children).
    kids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1] == str(eng.pid):
                kids.append(d)
        except (OSError, IndexError):
            pass
    check(len(kids) == 1, f"inferprof-run has one child, the engine: {kids}")
    if len(kids) != 1:
        eng.terminate()
        eng.wait(60)
        return
    os.kill(int(kids[0]), signal.SIGKILL)
    rc = eng.wait(60)
    summary["kill_returncode"] = rc
    check(rc == -signal.SIGKILL, f"inferprof-run died of the engine's SIGKILL: returncode {rc}")
    got = wait_counts(prom_url, {"signal": 1})
    summary["after_kill"] = got
    check(got.get("signal", 0) >= 1, f"the kill counted as signal: {got}")

    eng_out = open(eng_log_path).read()
    # vLLM 0.32 logs the prompt only at DEBUG (request_logger.py: "Only
    # limited information will be logged" above it).
    check(PROMPT in eng_out, "vLLM logged the prompt (--enable-log-requests --log-level DEBUG): the check below means something")
    prom = get(prom_url)
    signals = get(f"http://127.0.0.1:{ports['gs']}/signals")
    summary["signals_errors"] = json.loads(signals).get("errors", [])
    check(any("engine killed by signal SIGKILL" in e.get("message", "") for e in summary["signals_errors"]),
          f"/signals errors holds the kill: {summary['signals_errors']}")
    col_out = open(col_log_path).read()
    for name, text in (("Prometheus", prom), ("/signals", signals), ("the collector's output", col_out)):
        check(PROMPT not in text, f"no prompt in {name}")
    check('"log records"' in col_out, "the collector's debug exporter saw the records")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--venv", required=True)
    p.add_argument("--bindir", default=os.path.join(ROOT, "bin"))
    p.add_argument("--work", default="")
    p.add_argument("--start-limit", type=int, default=600)
    p.add_argument("--cases", default="bad_flag,kill")
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="inferprof-e2e-vllm-errors-")
    os.makedirs(work, exist_ok=True)
    model_dir = os.path.join(work, MODEL)
    subprocess.run([os.path.join(args.venv, "bin", "python"), os.path.join(HERE, "make_model.py"), model_dir],
                   check=True, stdout=subprocess.DEVNULL)

    ports = {k: free_port() for k in ("grpc", "http", "health", "prom", "tel", "gs", "vllm")}
    sock = tempfile.mkdtemp(prefix="ip-", dir="/tmp")
    os.chmod(sock, 0o700)
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
        "INFERPROF_DATA_DIR": work,
        "GRAPHSIGNAL_API_KEY": "",
    })
    col_log_path = os.path.join(work, "collector.log")
    col = subprocess.Popen([os.path.join(args.bindir, "otelcol-inferprof"), "--config", os.path.join(ROOT, "config", "default.yaml")],
                           env=col_env, stdout=open(col_log_path, "w"), stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    prom_url = f"http://127.0.0.1:{ports['prom']}/metrics"
    failures, summary = [], {}

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, file=sys.stderr)
        if not ok:
            failures.append(what)

    launcher = [os.path.join(args.bindir, "inferprof-run"), "-no-cupti",
                "-step-endpoint", col_env["INFERPROF_STEP_ENDPOINT"], "-logs-endpoint", f"127.0.0.1:{ports['grpc']}", "--"]
    env = engine_env(args.venv)
    try:
        wait_http(f"http://127.0.0.1:{ports['health']}/", col, 60, "collector")

        # 1. A bad flag.
        if "bad_flag" in args.cases.split(","):
            bad_flag(args, launcher, model_dir, ports, env, work, prom_url, summary, check)

        # 2. A server: a logged prompt, a refused request, kill -9.
        if "kill" in args.cases.split(","):
            kill(args, launcher, model_dir, ports, env, work, prom_url, col_log_path, summary, check)
    finally:
        col.send_signal(signal.SIGTERM)
        col.wait(60)
        with open(os.path.join(work, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
    print(f"e2e-vllm-errors: {work}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
