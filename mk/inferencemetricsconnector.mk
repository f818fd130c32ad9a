# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# inference_metrics connector (and the inference processor in front of it)
# against contrib's span_metrics connector, on the same batches of vLLM
# request spans, in the same run. BenchmarkPipeline also runs
# impl=required_writes: only the canonical attribute writes, the floor.
.PHONY: bench-inference
BENCH_TARGETS += bench-inference
INFERENCE_METRICS_PKG := ./connector/inferencemetricsconnector/
# impl=none (the loop and copies alone, for instruction counts) is left out:
# it times nothing, so -benchtime's 1 s would take thousands of copies.
PIPELINE_IMPLS := (span_metrics|ours|ours_no_phase_spans|required_writes|required_writes_phase_spans)

# BenchmarkPipeline runs once per pass of a loop, BENCHCOUNT passes, so every
# impl's samples are interleaved with the others' (go test -count would run
# each impl's samples back to back, and this machine's load drifts). The
# ratios of issue 16 are read against impl=required_writes.
bench-inference: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^BenchmarkConsumeTraces$$' -count $(BENCHCOUNT) $(INFERENCE_METRICS_PKG) | tee $(BENCH_OUT)/inference.txt
	$(GO) test -c -o $(BENCH_OUT)/inferencemetrics.test $(INFERENCE_METRICS_PKG)
	@rm -f $(BENCH_OUT)/inference-pipeline.txt
	@set -eo pipefail; for i in $$(seq $(BENCHCOUNT)); do \
	  (cd $(INFERENCE_METRICS_PKG) && $(BENCH_OUT)/inferencemetrics.test -test.run '^$$' -test.bench '^BenchmarkPipeline$$/spans=1000/impl=$(PIPELINE_IMPLS)$$' \
	    -test.benchmem -test.count 1) | tee -a $(BENCH_OUT)/inference-pipeline.txt; \
	done
	$(GO) test -run '^$$' -bench '^BenchmarkCardinalityAttack$$' -benchtime 1x -count $(BENCHCOUNT) $(INFERENCE_METRICS_PKG) | tee $(BENCH_OUT)/inference-attack.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/inference.txt
	$(BENCHSTAT) -col '/impl@(required_writes ours_no_phase_spans required_writes_phase_spans ours span_metrics)' $(BENCH_OUT)/inference-pipeline.txt
	@mk/ratio.sh impl required_writes $(BENCH_OUT)/inference-pipeline.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/inference-attack.txt
