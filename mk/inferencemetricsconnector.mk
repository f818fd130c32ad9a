# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# inference_metrics connector (and the inference processor in front of it)
# against contrib's span_metrics connector, on the same batches of vLLM
# request spans, in the same run. BenchmarkPipeline also runs
# impl=required_writes: only the canonical attribute writes, the floor.
.PHONY: bench-inference
BENCH_TARGETS += bench-inference
INFERENCE_METRICS_PKG := ./connector/inferencemetricsconnector/

bench-inference: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^(BenchmarkConsumeTraces|BenchmarkPipeline)$$' -count $(BENCHCOUNT) $(INFERENCE_METRICS_PKG) | tee $(BENCH_OUT)/inference.txt
	$(GO) test -run '^$$' -bench '^BenchmarkCardinalityAttack$$' -benchtime 1x -count $(BENCHCOUNT) $(INFERENCE_METRICS_PKG) | tee $(BENCH_OUT)/inference-attack.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/inference.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/inference-attack.txt
