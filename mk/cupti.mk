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
	$(BENCHSTAT) $(BENCH_OUT)/cupti-c.txt
