# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# nvml receiver: cost of one scrape interval on go-nvml's dgxh200 mock, for 1 and 8 GPUs,
# against the bare NVML reads of the same fields (impl=baseline).
.PHONY: bench-nvml
BENCH_TARGETS += bench-nvml

bench-nvml: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^BenchmarkScrape$$' -benchmem -count $(BENCHCOUNT) ./receiver/nvmlreceiver/ | tee $(BENCH_OUT)/nvml.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/nvml.txt
