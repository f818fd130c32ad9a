#!/usr/bin/env python3
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Write the SGLang span fixtures with SGLang's own tracing code.

Run with the Python of a venv that has sglang (0.5.23 checked) and the
OpenTelemetry SDK:

    ~/.cache/inferprof/sglang-try/bin/python \
        integrations/python/tools/gen_sglang_spans.py \
        processor/inferenceprocessor/testdata/spans

Each request is driven through sglang.srt.observability.req_time_stats
(APIServerReqTimeStats in the tokenizer, SchedulerReqTimeStats in the
scheduler) and trace.py (TraceReqContext), calling the set_* methods in the
order TokenizerManager and the Scheduler call them; the trace context
crosses from tokenizer to scheduler by pickle, as it does over ZMQ. The root's
attributes come from TokenizerManager.convert_to_span_attrs itself. Spans
go to the SDK's InMemorySpanExporter and are written with the OTLP exporter's
own encoder (encode_spans), as OTLP/JSON: one file per process, what its
BatchSpanProcessor would send.

What is replaced, and why:
- opentelemetry.exporter.otlp.proto.http is stubbed in sys.modules: trace.py
  imports it at the top and the venv has only the gRPC exporter; nothing
  here exports over the network.
- Each engine process gets the TracerProvider process_tracing_init builds
  (Resource with service.name, TraceCustomIdGenerator, tracer
  "sglang server") with an in-memory exporter in place of OTLP. The global
  provider can be set only once per Python process, so the provider is
  made here and set as trace.tracer.
- The clock is injected so the files are stable: req_time_stats' time
  module and trace.get_cur_time_ns read one fake clock, and
  calibrate_time_diff pins global_diff_realtime_monotonic so perf_counter
  100.0 is 2026-01-01T00:00:00Z. The id generator is reseeded with a fixed
  seed, threading.get_native_id gives a fixed pid per process, _get_host_id
  a fixed machine id, uuid4 (the batch id "bid") a counter, and the SDK's
  service.instance.id (a random UUID per process) the pid as a UUID.
"""

import gc
import json
import os
import pickle
import sys
import threading
import types
import uuid

for _k in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "SGLANG_TRACE_ASYNC"):
    os.environ.pop(_k, None)

_http = types.ModuleType("opentelemetry.exporter.otlp.proto.http.trace_exporter")
_http.OTLPSpanExporter = None
sys.modules.setdefault(_http.__name__, _http)

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
import opentelemetry.sdk.resources as otel_resources  # noqa: E402
from opentelemetry.sdk.resources import SERVICE_NAME, Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import sglang  # noqa: E402
import sglang.srt.observability.req_time_stats as rts  # noqa: E402
import sglang.srt.observability.trace as st  # noqa: E402
from sglang.srt.disaggregation.utils import DisaggregationMode  # noqa: E402
from sglang.srt.managers.tokenizer_manager import TokenizerManager  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: E402

T0 = 1767225600.0  # 2026-01-01T00:00:00Z, as the other fixtures
DIFF = T0 - 100.0
HOST = "1a2b3c4d5e6f70819a0b1c2d3e4f5061"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


class Clock:
    now = 0.0


clock = Clock()


def at(t):
    clock.now = t


def _calibrate():
    rts.global_diff_realtime_monotonic = DIFF


rts.time = types.SimpleNamespace(perf_counter=lambda: clock.now, time=lambda: clock.now + DIFF)
rts.calibrate_time_diff = _calibrate
_calibrate()
st.get_cur_time_ns = lambda: int((clock.now + DIFF) * 1e9)
_bids = iter(range(1, 1 << 30))
rts.uuid = types.SimpleNamespace(uuid4=lambda: uuid.UUID(int=next(_bids) << 96))
st._get_host_id = lambda: HOST


class Proc:
    """One engine process: its provider, exporter, pid and thread label."""

    current = None

    def __init__(self, service, pid, seed, label, tp=None, dp=None, pp=None):
        self.pid = pid
        self.exporter = InMemorySpanExporter()
        # service.instance.id: a random UUID per process in the SDK
        otel_resources._service_instance_id = str(uuid.UUID(int=pid))
        otel_resources._service_instance_id_pid = os.getpid()
        gen = st.TraceCustomIdGenerator()
        gen.local_random.seed(seed)
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}), id_generator=gen)
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("sglang server")
        self.enter()
        st.trace_set_thread_info(label, tp, dp, pp)

    def enter(self):
        Proc.current = self
        st.tracer = self.tracer
        st.opentelemetry_initialized = True

    def spans(self):
        return self.exporter.get_finished_spans()


st.threading = types.SimpleNamespace(get_native_id=lambda: Proc.current.pid, local=threading.local)


def batch_of(reqs, mode):
    return types.SimpleNamespace(reqs=reqs, forward_mode=mode)


def span_attrs(rid, prompt, completion, cached, finish, params):
    """The root's attributes, by TokenizerManager.convert_to_span_attrs."""
    tm = types.SimpleNamespace(enable_trace=True, served_model_name=MODEL)
    state = types.SimpleNamespace(obj=types.SimpleNamespace(rid=rid, sampling_params=params))
    out = types.SimpleNamespace(completion_tokens=[completion], prompt_tokens=[prompt], cached_tokens=[cached],
                                finished_reasons=[{"type": finish} if finish else None])
    return TokenizerManager.convert_to_span_attrs(tm, state, out, 0)


PARAMS = {"max_new_tokens": 256, "temperature": 0.6, "top_k": 20}


def tokenizer_start(mode, rid, created, tokenized, dispatch, room=None, header=None):
    """TokenizerManager: _init_req_state, tokenize, _send_one_request.
    Returns the stats and the pickled request the scheduler receives."""
    at(created)
    t = rts.APIServerReqTimeStats(disagg_mode=mode)
    t.init_trace_ctx(rid, room, header)
    t.set_created_time()
    at(tokenized)
    t.set_tokenize_finish_time()
    at(dispatch[0])
    t.set_api_server_dispatch_time()
    wire = pickle.dumps(t)  # send_to_scheduler.send_pyobj
    at(dispatch[1])
    t.set_api_server_dispatch_finish_time()
    return t, wire


def scheduler_recv(wire, at_t):
    """Scheduler: Req.__init__ with the received time_stats."""
    at(at_t)
    recv = pickle.loads(wire)
    s = rts.SchedulerReqTimeStats.new_from_obj(recv)
    s.set_scheduler_recv_time()
    return types.SimpleNamespace(time_stats=s)


def unified(level):
    """A request that stopped: queued 0.30 s, two prefill chunks, a 0.05 s
    gap before the first decode batch, 199 decode steps."""
    rts_level = st.set_global_trace_level
    rts_level(level)
    tok = Proc("sglang", 700, 1, "Tokenizer")
    sch = Proc("sglang", 777, 2, "Scheduler", tp=0, pp=0)
    rid = "1a2b3c4de5f6a7b8"
    tok.enter()
    t, wire = tokenizer_start(DisaggregationMode.NULL, rid, 100.0, 100.008, (100.008, 100.02))
    sch.enter()
    req = scheduler_recv(wire, 100.021)
    s = req.time_stats
    at(100.022)
    s.set_wait_queue_entry_time()
    # get_new_batch_prefill, then get_next_batch_to_run
    at(100.322)
    rts.set_time_batch([req], "set_forward_entry_time")
    rts.set_schedule_time_batch(batch_of([req], ForwardMode.EXTEND))
    at(100.41)  # first chunk done, the second scheduled
    s.set_last_chunked_prefill_finish_time()
    rts.set_schedule_time_batch(batch_of([req], ForwardMode.EXTEND))
    at(100.49)
    s.set_prefill_finished_time()
    step, last = 0.0123, 100.54
    for i in range(199):
        at(last)
        rts.set_schedule_time_batch(batch_of([req], ForwardMode.DECODE))
        last = 100.54 + step * (i + 1) if i < 198 else 102.99
        at(last)
        s.set_last_decode_finish_time()
    s.set_completion_time()
    tok.enter()
    at(100.5)
    t.set_first_token_time()
    at(103.0)
    t.set_finished_time(span_attrs=span_attrs(rid, 1024, 200, 512, "stop", PARAMS))
    return tok.spans(), sch.spans()


def aborted():
    """A client abort while the request waits in the queue (the common abort
    before the first token): Scheduler.abort_request pops it from
    waiting_queue and sends AbortReq; the Req is dropped, so
    TraceReqContext.__del__ closes its thread span; the tokenizer's
    _handle_abort_req calls set_finished_time() with no attributes."""
    st.set_global_trace_level(3)
    tok = Proc("sglang", 700, 3, "Tokenizer")
    sch = Proc("sglang", 777, 4, "Scheduler", tp=0, pp=0)
    rid = "9c8d7e6f5a4b3c2d"
    tok.enter()
    t, wire = tokenizer_start(DisaggregationMode.NULL, rid, 200.0, 200.004, (200.004, 200.01))
    sch.enter()
    req = scheduler_recv(wire, 200.011)
    at(200.012)
    req.time_stats.set_wait_queue_entry_time()
    at(200.89)
    del req
    gc.collect()
    tok.enter()
    at(200.9)
    t.set_finished_time()
    return tok.spans(), sch.spans()


PD_TRACE = "2f1e0d9c8b7a69584736251403f2e1d0"
PD_ROOM = 0x3ADE68B1


def pd():
    """PD disaggregation at trace level 1: the router's traceparent reaches
    both servers; each tokenizer names its root by role and sets
    bootstrap_room; each scheduler writes its role's stages."""
    st.set_global_trace_level(1)
    header = {"traceparent": f"00-{PD_TRACE}-f0f0f0f0f0f0f0f0-01"}
    rid = "5e6f7a8b9c0d1e2f"
    out = {}
    # prefill server
    tok = Proc("sglang-prefill", 800, 5, "PrefillTokenizer")
    sch = Proc("sglang-prefill", 801, 6, "Prefill Scheduler", tp=0, pp=0)
    tok.enter()
    t, wire = tokenizer_start(DisaggregationMode.PREFILL, rid, 300.0, 300.01, (300.01, 300.02), PD_ROOM, header)
    sch.enter()
    req = scheduler_recv(wire, 300.021)
    s = req.time_stats
    at(300.022)
    s.set_prefill_bootstrap_queue_entry_time()
    at(300.08)
    s.set_bootstrap_done_time()
    s.set_wait_queue_entry_time()
    at(300.2)
    rts.set_time_batch([req], "set_forward_entry_time")
    rts.set_schedule_time_batch(batch_of([req], ForwardMode.EXTEND))
    at(300.6)
    s.set_prefill_finished_time()
    s.set_prefill_transfer_queue_entry_time()
    at(300.7)
    s.set_prefill_kv_transfer_finish_time()
    s.set_completion_time()
    tok.enter()
    at(300.62)
    t.set_first_token_time()
    at(300.63)
    t.set_finished_time(span_attrs=span_attrs(rid, 2048, 1, 1024, "length", PARAMS))
    out["prefill"] = (tok.spans(), sch.spans())
    # decode server
    tok = Proc("sglang-decode", 900, 7, "DecodeTokenizer")
    sch = Proc("sglang-decode", 901, 8, "Decode Scheduler", tp=0, pp=0)
    tok.enter()
    t, wire = tokenizer_start(DisaggregationMode.DECODE, rid, 400.0, 400.01, (400.01, 400.02), PD_ROOM, header)
    sch.enter()
    req = scheduler_recv(wire, 400.021)
    s = req.time_stats
    at(400.03)
    s.set_decode_prealloc_queue_entry_time()
    at(400.1)
    s.set_decode_transfer_queue_entry_time()
    at(400.7)
    s.set_wait_queue_entry_time()
    at(400.78)
    rts.set_time_batch([req], "set_forward_entry_time")
    rts.set_schedule_time_batch(batch_of([req], ForwardMode.DECODE))
    at(403.19)
    s.set_completion_time()
    tok.enter()
    at(400.81)
    t.set_first_token_time()
    at(403.2)
    t.set_finished_time(span_attrs=span_attrs(rid, 2048, 200, 0, "stop", PARAMS))
    out["decode"] = (tok.spans(), sch.spans())
    return out


def _hex_ids(d):
    for k in ("traceId", "spanId", "parentSpanId"):
        if k in d:
            d[k] = bytes(__import__("base64").b64decode(d[k])).hex()


def otlp_json(spans):
    msg = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in msg.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                _hex_ids(sp)
                for ln in sp.get("links", []):
                    _hex_ids(ln)
    return msg


def legacy(msg):
    """0.5.20's first tracing module (python/sglang/srt/tracing/trace.py
    @bad7b92e) named the root "Req {rid[:8]}" and always set bootstrap_room,
    "None" when unset: 0.5.23 cannot write that, so it is these two edits of
    the real root."""
    msg = json.loads(json.dumps(msg))
    for sp in msg["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        if sp["name"].startswith(" Req "):
            sp["name"] = sp["name"][1:]
            sp["attributes"].insert(2, {"key": "bootstrap_room", "value": {"stringValue": "None"}})
    return msg


def write(dirname, name, msg):
    with open(os.path.join(dirname, name + ".json"), "w") as f:
        json.dump(msg, f, indent=1)
        f.write("\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    tok, sch = unified(1)
    root1 = otlp_json(tok)
    write(out, "sglang_root_level1", root1)
    write(out, "sglang_stages_level1", otlp_json(sch))
    write(out, "sglang_root_legacy", legacy(root1))
    tok, sch = unified(3)
    write(out, "sglang_root", otlp_json(tok))
    write(out, "sglang_stages_level3", otlp_json(sch))
    tok, sch = aborted()
    write(out, "sglang_abort_root", otlp_json(tok))
    write(out, "sglang_abort_stages", otlp_json(sch))
    for role, (tok, sch) in pd().items():
        write(out, f"sglang_pd_{role}_root", otlp_json(tok))
        write(out, f"sglang_pd_{role}_stages", otlp_json(sch))
    print(f"sglang {sglang.__version__}: wrote SGLang span fixtures to {out}")


if __name__ == "__main__":
    main()
