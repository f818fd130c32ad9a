# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# cupti: the CUPTI injection library (native/cupti) and the cupti receiver.
# `make test` runs `make -C native/cupti test` (no CUDA needed) via test-c.

.PHONY: native bench-cupti

## native: build native/cupti/build/libinferprof_cupti.so (needs CUPTI headers;
## says what is missing otherwise).
native:
	$(MAKE) -C native/cupti lib

BENCH_TARGETS += bench-cupti

## bench-cupti: decode+aggregate of wire records vs encoding/json of the same
## records in Kineto form (one core), then the C encode+send cost per record.
bench-cupti: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^BenchmarkDecodeAggregate$$' -cpu 1 -count $(BENCHCOUNT) ./receiver/cuptireceiver/ | tee $(BENCH_OUT)/cupti.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/cupti.txt
	$(MAKE) --no-print-directory -C native/cupti bench BENCH_RUNS=$(BENCHCOUNT) | tee $(BENCH_OUT)/cupti-c.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/cupti-c.txt

# GPU checks: they need a GPU, PyTorch and a library built for its CUDA
# major (make native CUPTI_HOME=...). Neither runs in make test; neither has
# been run on a GPU yet (docs/cupti-receiver.md, "On a GPU").
GPU_PYTHON ?= python3
CUPTI_LIB ?= $(firstword $(wildcard native/cupti/build/cuda*/libinferprof_cupti.so))

.PHONY: gpu-check gpu-overhead

## gpu-check: kernel counts from the library vs launch counts, eager and in a
## CUDA graph, in node and graph mode; the eager kernels' GPU time from CUPTI vs
## cudaEvent over the same kernels (fails outside 2 % or 0.05 ms).
gpu-check:
	@test -n "$(CUPTI_LIB)" || { echo "gpu-check: build the library first: make native CUPTI_HOME=<your CUDA's extras/CUPTI>"; exit 1; }
	$(GPU_PYTHON) native/cupti/gpu/gpu_check.py check $(abspath $(CUPTI_LIB))

## gpu-overhead: step time of a decode-like loop (64 small kernels per step)
## without and with the injection library, alternating; prints the overhead
## in % of step time (docs/overhead.md).
gpu-overhead:
	@test -n "$(CUPTI_LIB)" || { echo "gpu-overhead: build the library first: make native CUPTI_HOME=<your CUDA's extras/CUPTI>"; exit 1; }
	$(GPU_PYTHON) native/cupti/gpu/gpu_check.py overhead-compare $(abspath $(CUPTI_LIB))

# Kineto ingestion (issue 16): the real NCCL trace in testdata repeated
# KINETO_BENCH_COPIES times, gzipped; read to records on one core (events/s,
# against the previous encoding/json reader), then file to metrics against
# Python's json.load of the same file, alternating run by run so both see
# the same machine. benchstat compares each column with python_json_load.
BENCH_TARGETS += bench-kineto
KINETO_BENCH_COPIES ?= 10
KINETO_BENCH_TRACE := $(BENCH_OUT)/kineto-bench.json.gz

.PHONY: bench-kineto
bench-kineto: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) run ./receiver/cuptireceiver/internal/kineto/kinetotest/writetrace -copies $(KINETO_BENCH_COPIES) -o $(KINETO_BENCH_TRACE)
	KINETO_BENCH_TRACE=$(KINETO_BENCH_TRACE) KINETO_BENCH_COPIES=$(KINETO_BENCH_COPIES) \
	  $(GO) test -run '^$$' -bench '^BenchmarkRead$$' -cpu 1 -count $(BENCHCOUNT) ./receiver/cuptireceiver/internal/kineto/ | tee $(BENCH_OUT)/kineto-read.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/kineto-read.txt
	$(GO) test -c -o $(BENCH_OUT)/cuptireceiver.test ./receiver/cuptireceiver/
	@rm -f $(BENCH_OUT)/kineto-file.txt
	@for i in $$(seq $(BENCHCOUNT)); do \
	  python3 receiver/cuptireceiver/internal/kineto/kinetotest/json_load.py $(KINETO_BENCH_TRACE) | tee -a $(BENCH_OUT)/kineto-file.txt; \
	  (cd receiver/cuptireceiver && KINETO_BENCH_TRACE=$(KINETO_BENCH_TRACE) KINETO_BENCH_COPIES=$(KINETO_BENCH_COPIES) \
	    $(BENCH_OUT)/cuptireceiver.test -test.run '^$$' -test.bench '^BenchmarkKinetoFileToMetrics$$' -test.count 1 -test.cpu 1 -test.benchmem) \
	    | grep -E '^(Benchmark|--- FAIL|\s+\S+_test.go)' | tee -a $(BENCH_OUT)/kineto-file.txt; \
	done
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/kineto-file.txt

# The CUPTI path end to end (issue 16): the C client (the injection
# library's encoder and transport) streams to the cupti receiver of the
# built collector at 0.5 to 8 M records/s; dropped records, the collector's
# CPU per million records and the rate reached, per transport variant
# (client=before is the transport without the backlog).
BENCH_TARGETS += bench-cupti-e2e
CUPTI_BENCH_SECONDS ?= 1

.PHONY: bench-cupti-e2e
bench-cupti-e2e: build $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	INFERPROF_BIN=$(BIN) CUPTI_BENCH_SECONDS=$(CUPTI_BENCH_SECONDS) $(GO) test -run '^$$' -bench '^BenchmarkCUPTIEndToEnd$$' -benchtime 1x -count $(BENCHCOUNT) ./e2e/ | tee $(BENCH_OUT)/cupti-e2e.txt
	$(BENCHSTAT) -col /client $(BENCH_OUT)/cupti-e2e.txt
