# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# inference processor (processor/inferenceprocessor, issue 3).

.PHONY: bench-inferenceprocessor

BENCH_TARGETS += bench-inferenceprocessor

## bench-inferenceprocessor: processor cost on batches of vLLM request spans,
## phase spans off and on, against the per-batch copy every mode pays (the
## processor mutates its input), compared column by column with benchstat.
bench-inferenceprocessor: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^BenchmarkProcessor$$' -cpu 1 -count $(BENCHCOUNT) ./processor/inferenceprocessor/ | tee $(BENCH_OUT)/inferenceprocessor.txt
	$(BENCHSTAT) -col /mode $(BENCH_OUT)/inferenceprocessor.txt
