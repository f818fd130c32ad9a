# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The e2e figures' arithmetic on a small run folder written here.

Each case builds the files run.py would leave (client records, OTLP JSON
lines, vLLM /metrics text) for two requests, checks that the figures pass,
then breaks one input and checks that the matching figure fails.
"""

import json
import os
import tempfile
import unittest

import analyze


def attr(k, v):
    if isinstance(v, bool):
        return {"key": k, "value": {"boolValue": v}}
    if isinstance(v, int):
        return {"key": k, "value": {"intValue": str(v)}}
    if isinstance(v, float):
        return {"key": k, "value": {"doubleValue": v}}
    if isinstance(v, list):
        return {"key": k, "value": {"arrayValue": {"values": [attr("", x)["value"] for x in v]}}}
    return {"key": k, "value": {"stringValue": v}}


def batch(spans, resource=None):
    res = [attr(k, v) for k, v in (resource or {}).items()]
    return {"resourceSpans": [{"resource": {"attributes": res}, "scopeSpans": [{"spans": [
        {"name": s["name"], "spanId": s.get("id", ""), "parentSpanId": s.get("parent", ""),
         "startTimeUnixNano": str(s.get("start", 0)), "endTimeUnixNano": str(s.get("end", 0)),
         "attributes": [attr(k, v) for k, v in s["attrs"].items()]} for s in spans]}]}]}


def hist(name, count, total, buckets=()):
    les = "".join(f'{name}_bucket{{le="{le}",model_name="tiny-llama"}} {c}\n' for le, c in buckets)
    return les + f'{name}_count{{model_name="tiny-llama"}} {count}\n{name}_sum{{model_name="tiny-llama"}} {total}\n'


class Run:
    """A run folder of two finished requests of 4 tokens, at concurrency 1 and 32."""

    def __init__(self, d):
        self.d = d
        self.client = []
        self.spans = []
        self.steps = []
        t = 1000.0
        for i, rid in enumerate(("chatcmpl-a", "cmpl-b")):
            send = t + i * 10
            chunks = [send + 0.050, send + 0.060, send + 0.070, send + 0.080]
            self.client.append({"n": i + 1, "level": (1, 32)[i], "api": "chat", "max_tokens": 4, "abort": False,
                                "mark": f"zqxsecret{i:04d}", "send": send, "end": send + 0.085, "id": rid,
                                "chunks": chunks, "text": "alpha beta gamma delta",
                                "usage": {"prompt_tokens": 10, "completion_tokens": 4,
                                          "prompt_tokens_details": {"cached_tokens": 0}}})
            self.spans.append({"name": "llm_request", "id": f"s{i}", "attrs": {
                "gen_ai.request.id": rid, "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 4,
                "gen_ai.latency.time_to_first_token": 0.045, "gen_ai.latency.e2e": 0.080,
                "gen_ai.latency.time_in_queue": (0.001, 0.020)[i],
                "gen_ai.latency.time_in_model_prefill": (0.040, 0.020)[i],
                "gen_ai.latency.time_in_model_decode": 0.030,
                "inferprof.latency.itl.gaps": [0.010, 0.010, 0.010]}})
            # Prefill of 10 tokens (the first output token), then 3 decode
            # steps of 1. request_tokens are the output tokens each got.
            # The completions endpoint's engine id is the API's plus "-0".
            eid = rid + "-0" if rid.startswith("cmpl-") else rid
            if i == 1:
                self.spans[-1]["attrs"]["gen_ai.request.id"] = eid
            for j, tok in enumerate((10, 1, 1, 1)):
                self.steps.append({"name": "engine.step", "start": int((send + j * 0.01) * 1e9),
                                   "end": int((send + j * 0.01 + 0.005) * 1e9), "attrs": {
                    "inferprof.step.index": i * 4 + j, "inferprof.step.scheduled_tokens": tok,
                    "inferprof.step.request_ids": [eid], "inferprof.step.request_tokens": [1],
                    "inferprof.step.running_requests": 1, "inferprof.step.waiting_requests": 0}})
        # One stream the client closed mid-way, after the others.
        self.client.append({"n": 1001, "level": 8, "api": "chat", "max_tokens": 400, "abort": True,
                            "mark": "zqxsecret1001", "send": 1100.0, "end": 1100.2, "id": "chatcmpl-c",
                            "chunks": [1100.05, 1100.06, 1100.07], "text": "x", "usage": None})
        self.spans.append({"name": "llm_request", "id": "s2", "attrs": {
            "gen_ai.request.id": "chatcmpl-c", "error.type": "abort", "gen_ai.usage.output_tokens": 5}})
        self.steps.append({"name": "engine.step", "start": int(1100.01e9), "end": int(1100.02e9), "attrs": {
            "inferprof.step.scheduled_tokens": 8, "inferprof.step.request_ids": ["chatcmpl-c"],
            "inferprof.step.request_tokens": [1]}})
        self.samples = [{"t": 1000.02, "t_end": 1000.03, "metrics": {"running": 1, "waiting": 0}}] * 3
        self.vllm_after = hist("vllm:time_to_first_token_seconds", 2, 0.09) + \
            hist("vllm:e2e_request_latency_seconds", 2, 0.16) + \
            hist("vllm:inter_token_latency_seconds", 6, 0.06,
                 ((0.01, 6), (0.025, 6), (0.05, 6), (0.1, 6), ("+Inf", 6)))
        self.ours = hist("gen_ai_server_time_to_first_token_seconds", 2, 0.09).replace("model_name", "gen_ai_request_model") + \
            hist("gen_ai_server_request_duration_seconds", 2, 0.16).replace("model_name", "gen_ai_request_model")
        # vLLM's own series as the collector re-exports them, with the
        # engine's identity: the two finished requests (no warm-up here).
        self.resource = {"service.instance.id": "inst-1"}
        self.engine = {"pid": 4242, "host": "gpu-1", "warmup": 0}
        ident = 'host_name="gpu-1",model_name="tiny-llama",process_pid="4242",service_instance_id="inst-1"'
        self.scraped = f'vllm:time_to_first_token_seconds_count{{{ident}}} 2\n' + \
            f'vllm:kv_cache_usage_perc{{{ident}}} 0.25\n'
        self.col_samples = [{"t": 1000.0 + i, "t_end": 1000.1 + i, "metrics": {"running": 0, "waiting": 0, "kv": kv}}
                            for i, kv in enumerate((0.0, 0.25, 0.0))]
        self.signals = {"metrics": [{"name": "vllm:time_to_first_token_seconds", "type": "histogram",
                                     "stats": {"count": 2, "sum": 0.09}}]}
        # /dashboard.json: the engine's series and its latency histograms,
        # the charts from the request spans (tracing on).
        self.dashboard = {
            "engines": [{"service": "vllm", "instance": "inst-1", "kv_cache_usage": [[1000000, 0.25]],
                         "running": [[1000000, 1]], "waiting": [[1000000, 0]], "preemptions": []}],
            "engine_latency": {"ttft": [{"count": 2}], "e2e": [{"count": 2}], "itl": [{"count": 6}]},
            "latency": {"ttft": [{"count": 2}], "e2e": [{"count": 2}], "itl": [{"count": 6}]},
            "latency_source": {"ttft": "request_spans", "e2e": "request_spans", "itl": "request_spans",
                               "tpot": "request_spans"}}

    def write(self):
        def w(name, text):
            with open(os.path.join(self.d, name), "w") as f:
                f.write(text)
        w("client.jsonl", "".join(json.dumps(r) + "\n" for r in self.client))
        w("inferprof-traces.jsonl", json.dumps(batch(self.spans, self.resource)) + "\n")
        w("steps.jsonl", json.dumps(batch(self.steps, getattr(self, "steps_resource", self.resource))) + "\n")
        w("samples.json", json.dumps(self.samples))
        w("vllm-metrics-before.txt", "")
        w("engine.json", json.dumps(self.engine))
        w("collector-samples.json", json.dumps(self.col_samples))
        w("vllm-metrics-mid.txt", self.vllm_after)
        w("vllm-metrics-after.txt", self.vllm_after)
        w("prometheus-mid.txt", self.ours + self.scraped)
        w("prometheus.txt", self.ours)
        w("signals.txt", json.dumps(self.signals))
        w("dashboard.txt", json.dumps(self.dashboard))
        for f in ("timeline.txt", "collector.log", "telemetry.txt"):
            w(f, "{}")

    def figures(self, mode="default"):
        self.write()
        out = []
        analyze.analyze_mode(mode, self.d, out)
        analyze.engine_metrics(mode, self.d, out)
        analyze.privacy(self.d, out, "default")
        return {f["figure"]: f for f in out}


class AnalyzeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run = Run(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def failing(self, figs):
        return sorted(k for k, f in figs.items() if not f["pass"])

    def test_consistent_run_passes(self):
        figs = self.run.figures()
        self.assertEqual(self.failing(figs), [])
        self.assertIn("default: ITL p50, |ours − client's chunk gaps| (s)", figs)

    def test_scraped_ttft_count_short_of_requests_sent_fails(self):
        self.run.scraped = self.run.scraped.replace("} 2\n", "} 1\n", 1)
        self.assertIn("default: scraped vllm:time_to_first_token_seconds count vs requests sent",
                      self.failing(self.run.figures()))

    def test_scraped_series_of_another_instance_fails(self):
        self.run.resource = {"service.instance.id": "inst-2"}
        self.assertIn("default: scraped vllm:* series without the spans' service.instance.id, the engine's pid and host",
                      self.failing(self.run.figures()))

    def test_flat_kv_cache_usage_fails(self):
        for x in self.run.col_samples:
            x["metrics"]["kv"] = 0.25
        self.assertIn("default: scraped vllm:kv_cache_usage_perc under load, max − min", self.failing(self.run.figures()))

    def test_signals_without_the_engine_histogram_fails(self):
        self.run.signals = {"metrics": []}
        self.assertIn("default: /signals vllm:time_to_first_token_seconds count vs vllm /metrics at the end",
                      self.failing(self.run.figures()))

    def test_missing_span_fails(self):
        self.run.spans.pop(1)
        self.assertIn("default: finished requests with exactly one request span", self.failing(self.run.figures()))

    def test_usage_mismatch_fails(self):
        self.run.spans[0]["attrs"]["gen_ai.usage.output_tokens"] = 5
        self.assertIn("default: request spans whose input/output tokens equal the client's usage",
                      self.failing(self.run.figures()))

    def test_collector_ttft_above_client_fails(self):
        self.run.spans[0]["attrs"]["gen_ai.latency.time_to_first_token"] = 0.060  # client saw 0.050
        self.assertIn("default: requests whose collector TTFT exceeds the client's", self.failing(self.run.figures()))

    def test_median_lag_beyond_bound_fails(self):
        self.run.spans[0]["attrs"]["gen_ai.latency.e2e"] = 0.080 - 0.9  # client's e2e 0.085: lag 0.905
        self.assertIn("default: e2e client − collector, median at concurrency 1 (s)", self.failing(self.run.figures()))

    def test_histogram_sum_off_by_2_percent_fails(self):
        self.run.vllm_after = self.run.vllm_after.replace(" 0.09\n", " 0.0918\n")
        self.assertIn("default: TTFT histogram sum, ours vs vllm /metrics (relative difference)",
                      self.failing(self.run.figures()))

    def test_gap_count_fails(self):
        self.run.spans[1]["attrs"]["inferprof.latency.itl.gaps"] = [0.01, 0.01]
        self.assertIn("default: requests whose ITL gap count ≠ completion tokens − 1", self.failing(self.run.figures()))

    def test_scheduled_tokens_identity_fails(self):
        self.run.steps[1]["attrs"]["inferprof.step.scheduled_tokens"] = 2
        self.assertIn("default: Σ scheduled tokens − Σ (prompt − cached) − Σ (completion − 1), finished requests' steps",
                      self.failing(self.run.figures()))

    def test_step_output_tokens_fail(self):
        self.run.steps[1]["attrs"]["inferprof.step.request_tokens"] = [2]
        self.assertIn("default: finished requests whose step output tokens ≠ usage completion tokens",
                      self.failing(self.run.figures()))

    def test_cached_tokens_enter_the_identity(self):
        # 6 of 10 prompt tokens cached: the prefill step schedules 4.
        self.run.client[0]["usage"]["prompt_tokens_details"]["cached_tokens"] = 6
        self.run.steps[0]["attrs"]["inferprof.step.scheduled_tokens"] = 4
        self.assertEqual(self.failing(self.run.figures()), [])

    def test_decode_steps_fail(self):
        # Same output tokens, but two in one step: 2 decode steps, not 3.
        self.run.steps[1]["attrs"]["inferprof.step.request_ids"] = []
        self.run.steps[1]["attrs"]["inferprof.step.request_tokens"] = []
        self.run.steps[2]["attrs"]["inferprof.step.request_tokens"] = [2]
        self.assertIn("default: finished requests whose decode steps ≠ completion − 1", self.failing(self.run.figures()))

    def test_chunked_prefill_step_without_a_token_passes(self):
        self.run.steps[0]["attrs"]["inferprof.step.request_tokens"] = [0]
        self.run.steps[0]["attrs"]["inferprof.step.scheduled_tokens"] = 6
        self.run.steps.insert(1, {"name": "engine.step", "start": self.run.steps[0]["start"] + 1,
                                  "end": self.run.steps[0]["end"] + 1, "attrs": {
            "inferprof.step.scheduled_tokens": 4, "inferprof.step.request_ids": ["chatcmpl-a"],
            "inferprof.step.request_tokens": [1]}})
        self.assertEqual(self.failing(self.run.figures()), [])

    def test_abort_not_marked_fails(self):
        del self.run.spans[2]["attrs"]["error.type"]
        self.assertIn("default: aborted streams' spans that are neither an abort nor a complete request",
                      self.failing(self.run.figures()))

    def test_abort_the_engine_did_not_stop_fails(self):
        self.run.steps[-1]["attrs"]["inferprof.step.request_tokens"] = [400]
        self.assertIn("default: aborted streams the engine stopped before max_tokens, or finished before the close",
                      self.failing(self.run.figures()))

    def test_abort_finished_before_the_close_passes_beside_a_stopped_one(self):
        # A second abort whose close reached the engine after its last token:
        # its steps hold max_tokens and its span is a complete request.
        self.run.client.append({"n": 1002, "level": 8, "api": "chat", "max_tokens": 2, "abort": True,
                                "mark": "zqxsecret1002", "send": 1100.0, "end": 1100.2, "id": "chatcmpl-d",
                                "chunks": [1100.05, 1100.06], "text": "x", "usage": None})
        self.run.spans.append({"name": "llm_request", "id": "s3", "attrs": {
            "gen_ai.request.id": "chatcmpl-d", "gen_ai.usage.output_tokens": 2}})
        self.run.steps.append({"name": "engine.step", "start": int(1100.03e9), "end": int(1100.04e9), "attrs": {
            "inferprof.step.scheduled_tokens": 1, "inferprof.step.request_ids": ["chatcmpl-d"],
            "inferprof.step.request_tokens": [2]}})
        figs = self.run.figures()
        f = figs["default: aborted streams the engine stopped before max_tokens, or finished before the close"]
        self.assertTrue(f["pass"], f)
        self.assertEqual((f["stopped"], f["finished_before_close"]), (1, 1))

    def test_itl_beside_vllms_histogram(self):
        self.assertEqual(self.failing(self.run.figures()), [])
        # A gap of 0.3 s the engine's histogram never saw: count and p99 fail.
        self.run.spans[0]["attrs"]["inferprof.latency.itl.gaps"] = [0.010, 0.010, 0.010, 0.3]
        failing = self.failing(self.run.figures())
        self.assertIn("default: ITL gaps, ours vs vllm /metrics inter-token count", failing)
        self.assertIn("default: ITL p99, ours within vllm /metrics' p99 bucket ± one (s)", failing)
        self.assertIn("default: ITL gaps' sum, ours vs vllm /metrics (relative difference)", failing)

    def test_dashboard_not_matching_vllm_fails(self):
        self.run.dashboard["engine_latency"]["ttft"] = [{"count": 1}]
        self.run.dashboard["engines"][0]["running"] = [[1000000, 3]]  # the steps never held 3
        failing = self.failing(self.run.figures())
        self.assertIn("default: dashboard engine ttft count vs vllm /metrics at the end", failing)
        self.assertIn("default: dashboard running requests, max (≤ the steps' max)", failing)

    def test_dashboard_other_instance_or_engine_source_fails(self):
        self.run.dashboard["engines"][0]["instance"] = "someone-else"
        self.run.dashboard["latency_source"]["ttft"] = "engine_metrics"
        failing = self.failing(self.run.figures())
        self.assertIn("default: dashboard engine series of the engine's instance with KV-cache, running and waiting points",
                      failing)
        self.assertIn("default: dashboard latency charts not from request_spans", failing)

    def test_notrace(self):
        # vLLM without tracing: no request span; the identity is the steps',
        # the dashboard's charts are the engine's histograms.
        self.run.spans = []
        self.run.client = [r for r in self.run.client if not r["abort"]]
        for s in self.run.steps:
            s.setdefault("resource", {})
        self.run.steps_resource = {"service.instance.id": "inst-1"}
        self.run.dashboard["latency_source"] = {k: "engine_metrics" for k in ("ttft", "e2e", "itl")}
        figs = self.run.figures("notrace")
        self.assertEqual(self.failing(figs), [])
        self.assertIn("notrace: dashboard ttft chart count vs vllm /metrics (tracing off)", figs)
        self.run.dashboard["latency_source"]["itl"] = "request_spans"
        self.run.dashboard["latency"]["e2e"] = []
        failing = self.failing(self.run.figures("notrace"))
        self.assertIn("notrace: dashboard latency charts not from engine_metrics", failing)
        self.assertIn("notrace: dashboard e2e chart count vs vllm /metrics (tracing off)", failing)

    def test_sched_mismatch_fails(self):
        self.run.samples = [{"t": 1000.02, "t_end": 1000.03, "metrics": {"running": 2, "waiting": 0}}] * 3
        self.assertIn("default: busy /metrics samples whose running/waiting equal a step's in the second before",
                      self.failing(self.run.figures()))

    def test_phases_beyond_e2e_fail(self):
        self.run.spans[0]["attrs"]["gen_ai.latency.time_in_model_decode"] = 0.2
        self.assertIn("default: requests whose queue + prefill + decode exceeds e2e, or lacks a phase",
                      self.failing(self.run.figures()))

    def test_duplicate_phase_span_fails(self):
        for _ in range(2):
            self.run.spans.append({"name": "vllm.request.queue", "parent": "s0", "attrs": {}})
        self.assertIn("default: request spans with two child spans of one phase name", self.failing(self.run.figures()))

    def test_prompt_marker_in_an_output_fails(self):
        self.run.write()
        with open(os.path.join(self.tmp.name, "collector.log"), "w") as f:
            f.write("request zqxsecret0001 done")
        out = []
        analyze.privacy(self.tmp.name, out, "default")
        self.assertFalse(out[0]["pass"])
        self.assertEqual(out[0]["found"][0]["file"], "collector.log")

    def test_negative_figure_fails(self):
        self.run.spans[0]["attrs"]["gen_ai.latency.time_in_queue"] = -0.5
        self.assertIn("default: negative latency or token figures", self.failing(self.run.figures()))

    def test_quantile_nearest_rank(self):
        self.assertEqual(analyze.quantile([4, 1, 3, 2], 0.5), 2)
        self.assertEqual(analyze.quantile([4, 1, 3, 2], 0.99), 4)

    def test_prom_parses_labels_and_skips_comments(self):
        p = analyze.prom('# HELP x\nvllm:num_requests_running{model_name="m"} 3.0\nbad line\n')
        self.assertEqual(p, {("vllm:num_requests_running", '{model_name="m"}'): 3.0})


if __name__ == "__main__":
    unittest.main()
