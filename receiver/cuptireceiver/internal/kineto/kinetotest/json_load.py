# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Time Python's json.load of a (gzipped) Kineto trace, the first thing
HolisticTraceAnalysis does with a trace, and print it as a Go benchmark line
so benchstat sets it beside BenchmarkKinetoFileToMetrics."""

import gzip
import json
import sys
import time


def main() -> None:
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    start = time.perf_counter()
    with opener(path, "rb") as f:
        doc = json.load(f)
    elapsed = time.perf_counter() - start
    events = len(doc["traceEvents"])
    print(f"BenchmarkKinetoFileToMetrics/impl=python_json_load\t1\t{elapsed * 1e9:.0f} ns/op\t{events / elapsed:.0f} events/s")


if __name__ == "__main__":
    main()
