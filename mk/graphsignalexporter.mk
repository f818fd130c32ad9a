# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# graphsignal exporter benchmarks, each against a baseline in the same run:
#  - encoding cost per datapoint against the otlp_http exporter's
#    marshalling (pdata protobuf + gzip) of the same metrics;
#  - the cumulative-to-delta step against a plain copy of its input.
.PHONY: bench-graphsignal
BENCH_TARGETS += bench-graphsignal

bench-graphsignal: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^BenchmarkEncode$$' -benchmem -count $(BENCHCOUNT) ./exporter/graphsignalexporter/ | tee $(BENCH_OUT)/graphsignal-encode.txt
	$(GO) test -run '^$$' -bench '^BenchmarkConvert$$' -benchmem -count $(BENCHCOUNT) ./internal/delta/ | tee $(BENCH_OUT)/graphsignal-delta.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/graphsignal-encode.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/graphsignal-delta.txt
