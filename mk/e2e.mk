# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# End-to-end CPU of the per-span path (issue 16): the built collector's CPU
# per 100,000 vLLM request spans on config/default.yaml against a stock
# otlp -> span_metrics pipeline run by the same binary
# (e2e/pipeline_bench_test.go). The two configurations alternate which goes
# first, one process each per run, BENCHCOUNT runs; benchstat prints default
# as a ratio of span_metrics, and mk/ratio.sh the ratio of the CPU medians
# (sec/op is the wall clock of a round, waits included, not the figure).
.PHONY: bench-e2e
BENCH_TARGETS += bench-e2e
BENCH_E2E_ROUNDS ?= 2x

## bench-e2e: the default pipeline's CPU per 100k vLLM spans against otlp -> span_metrics, alternated.
bench-e2e: build $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -c -o $(BENCH_OUT)/e2e.test ./e2e/
	@rm -f $(BENCH_OUT)/e2e-pipeline.txt
	@set -eo pipefail; for i in $$(seq $(BENCHCOUNT)); do \
	  if [ $$((i % 2)) = 0 ]; then order=reverse; else order=; fi; \
	  (cd e2e && INFERPROF_BIN=$(BIN) BENCH_E2E_ORDER=$$order $(BENCH_OUT)/e2e.test -test.run '^$$' \
	    -test.bench '^BenchmarkPipelineCPU$$' -test.benchtime $(BENCH_E2E_ROUNDS) -test.count 1 -test.timeout 30m) \
	    | tee -a $(BENCH_OUT)/e2e-pipeline.txt; \
	done
	$(BENCHSTAT) -col '/config@(span_metrics default default_no_phase_spans)' $(BENCH_OUT)/e2e-pipeline.txt
	@mk/ratio.sh config span_metrics $(BENCH_OUT)/e2e-pipeline.txt cpu-ms/100k-spans
