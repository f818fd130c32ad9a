# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Sends vLLM-shaped request spans with the real OpenTelemetry Python SDK and
its OTLP exporter (gRPC or HTTP/protobuf), as an engine does, and prints the
exporter's result as JSON. The exporter's own code compresses, retries and
reads the answer; exit status 1 when the export did not succeed.

Usage: python send.py --protocol grpc|http --endpoint HOST:PORT
                      [--compression gzip|none] [--count N] [--id-prefix P]
"""

import argparse
import json
import sys
import time

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind


def spans(service, count, prefix):
    """count finished llm_request spans, with vLLM's attributes (vllm/tracing.py)."""
    mem = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    tp.add_span_processor(SimpleSpanProcessor(mem))
    tracer = tp.get_tracer("vllm.llm_engine")
    start = time.time_ns() - 3_000_000_000
    for i in range(count):
        s = tracer.start_span("llm_request", kind=SpanKind.SERVER, start_time=start, attributes={
            "gen_ai.request.id": f"{prefix}{i}", "gen_ai.request.max_tokens": 128,
            "gen_ai.usage.prompt_tokens": 40, "gen_ai.usage.completion_tokens": 20,
            "gen_ai.latency.time_in_queue": 0.01, "gen_ai.latency.time_to_first_token": 0.1,
            "gen_ai.latency.e2e": 2.0, "gen_ai.latency.time_in_model_prefill": 0.08,
            "gen_ai.latency.time_in_model_decode": 1.8, "gen_ai.latency.time_in_model_inference": 1.88,
            "gen_ai.response.finish_reasons": '["stop"]'})
        s.end(end_time=start + 2_000_000_000)
    return mem.get_finished_spans()


def exporter(protocol, endpoint, gzip, timeout):
    if protocol == "grpc":
        from grpc import Compression
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        return OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=timeout,
                                compression=Compression.Gzip if gzip else Compression.NoCompression)
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter(endpoint=f"http://{endpoint}/v1/traces", timeout=timeout,
                            compression=Compression.Gzip if gzip else Compression.NoCompression)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--protocol", choices=("grpc", "http"), required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--compression", choices=("gzip", "none"), default="gzip")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--service", default="vllm")
    p.add_argument("--id-prefix", default="cmpl-py-")
    p.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    exp = exporter(a.protocol, a.endpoint, a.compression == "gzip", a.timeout)
    batch = spans(a.service, a.count, a.id_prefix)
    t0 = time.time()
    result = exp.export(batch)
    exp.shutdown()
    print(json.dumps({"result": result.name, "spans": len(batch), "seconds": round(time.time() - t0, 3)}))
    sys.exit(0 if result == SpanExportResult.SUCCESS else 1)


if __name__ == "__main__":
    main()
