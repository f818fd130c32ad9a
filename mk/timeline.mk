# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# The local timeline (GET /timeline on the inferprof_ui exporter's listener).
#  - make timeline: save the running collector's last TIMELINE_LAST to
#    TIMELINE_OUT (Chrome Trace Event JSON, for ui.perfetto.dev or
#    chrome://tracing), through bin/inferprof-run --timeline.
#  - bench-timeline: feeding the timeline against a copy of the same spans,
#    and rendering a window against OTLP JSON marshalling of the same spans;
#    the exporter's ConsumeTraces against feeding its store directly.
# Under bin/ (ignored by git), not the repository root; TIMELINE_OUT=path moves it.
TIMELINE_OUT  ?= bin/inferprof-timeline.json
TIMELINE_LAST ?= 60s

.PHONY: timeline bench-timeline
BENCH_TARGETS += bench-timeline

timeline:
	@mkdir -p bin
	$(GO) build -trimpath -o bin/inferprof-run ./cmd/inferprof-run
	bin/inferprof-run --timeline $(TIMELINE_OUT) --last $(TIMELINE_LAST)

bench-timeline: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^Benchmark(Ingest|Render)$$' -benchmem -count $(BENCHCOUNT) ./exporter/inferprofuiexporter/internal/timeline/ | tee $(BENCH_OUT)/timeline.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/timeline.txt
	$(GO) test -run '^$$' -bench '^BenchmarkConsumeTraces$$' -benchmem -count $(BENCHCOUNT) ./exporter/inferprofuiexporter/ | tee $(BENCH_OUT)/ui-consume.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/ui-consume.txt
