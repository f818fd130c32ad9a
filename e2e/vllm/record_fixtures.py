# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Writes the inference processor's recorded vLLM fixtures from a run.

Reads RUN/default/raw-traces.jsonl (what vLLM sent, before any processor:
observe.yaml's traces/raw pipeline), keeps one export batch's request spans
(a chat and a completion request, as sent), and writes
  processor/inferenceprocessor/testdata/spans/vllm032_default.json
  processor/inferenceprocessor/testdata/spans/vllm032_optin_main.json
The second is the same batch renamed as vLLM's main branch renames it under
OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (vllm/tracing
latest_gen_ai_semconv_attributes @2b10648): "{operation} {model}", with
gen_ai.operation.name and gen_ai.request.model added. vLLM 0.32 spans carry
no prompt or output; the tiny model's ids and clock values are kept as sent.

Usage: python record_fixtures.py RUN_DIR [MODEL]
"""

import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "processor", "inferenceprocessor", "testdata", "spans")


def attr(span, key):
    for a in span.get("attributes", []):
        if a["key"] == key:
            return next(iter(a["value"].values()))
    return None


def pick(path):
    """The first batch holding both a chat and a completion request span."""
    with open(path) as f:
        for line in f:
            b = json.loads(line)
            for rs in b.get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    spans = [s for s in ss["spans"] if s["name"] == "llm_request"]
                    chat = [s for s in spans if str(attr(s, "gen_ai.request.id")).startswith("chatcmpl-")]
                    cmpl = [s for s in spans if str(attr(s, "gen_ai.request.id")).startswith("cmpl-")]
                    if chat and cmpl:
                        ss["spans"] = [chat[0], cmpl[0]]
                        rs["scopeSpans"] = [ss]
                        return {"resourceSpans": [rs]}
    raise SystemExit(f"record_fixtures: no batch with a chat and a completion request in {path}")


def opt_in(batch, model):
    b = copy.deepcopy(batch)
    for s in b["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        op = "chat" if attr(s, "gen_ai.request.id").startswith("chatcmpl-") else "text_completion"
        s["name"] = f"{op} {model}"
        # latest_gen_ai_semconv_attributes puts the model first, then the operation.
        s["attributes"] += [{"key": "gen_ai.request.model", "value": {"stringValue": model}},
                            {"key": "gen_ai.operation.name", "value": {"stringValue": op}}]
    return b


def write(name, batch):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(batch, f, indent=1)
        f.write("\n")


def main():
    run = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else "tiny-llama"
    batch = pick(os.path.join(run, "default", "raw-traces.jsonl"))
    write("vllm032_default.json", batch)
    write("vllm032_optin_main.json", opt_in(batch, model))


if __name__ == "__main__":
    main()
