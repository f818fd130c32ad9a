# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# correlation (issue 13): tying kernel records to the engine steps that
# launched them (internal/gpuwindow, fed by the cupti receiver). The cost
# per kernel record on top of the receiver's sums (impl=aggregate, the
# baseline) at 1 M kernel records a second of timeline, on one core; and the
# heap the window keeps per second of timeline while steps are not final.

BENCH_TARGETS += bench-correlation

.PHONY: bench-correlation
bench-correlation: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^BenchmarkCorrelate$$' -cpu 1 -count $(BENCHCOUNT) ./receiver/cuptireceiver/ | tee $(BENCH_OUT)/correlation.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/correlation.txt
	$(GO) test -run '^$$' -bench '^BenchmarkWindowMemory$$' -benchtime 3x -cpu 1 -count $(BENCHCOUNT) ./receiver/cuptireceiver/ | tee $(BENCH_OUT)/correlation-memory.txt
	$(BENCHSTAT) -col /order $(BENCH_OUT)/correlation-memory.txt
