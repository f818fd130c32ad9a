# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Engine step spans: the Python hook, the engine_step receiver, internal/stepwire,
# internal/stepwindow and the inferprof-run launcher (issue 6).

.PHONY: bench-enginestep build-inferprof-run enginestep-fixture

BENCH_TARGETS += bench-enginestep

## build-inferprof-run: the launcher, bin/inferprof-run (finds integrations/python/bootstrap from there).
build-inferprof-run:
	@mkdir -p bin
	$(GO) build -trimpath -o bin/inferprof-run ./cmd/inferprof-run

## enginestep-fixture: regenerate the current wire version's Python-encoded datagrams the Go decoder tests read (older versions in testdata/v<N>/ stay as they are).
enginestep-fixture:
	python3 integrations/python/tools/gen_step_fixture.py internal/stepwire/testdata

## bench-enginestep: hook cost per step, vLLM's and SGLang's loops (timeit,
## targets 3 us at 1 request and 20 us at 256, issue 16; instructions with
## valgrind, vLLM and SGLang's default overlap loop), one send by how
## the receiver reads, then the Go benches: a step's hand-over through a ring
## against a datagram, datagram to span against OTLP unmarshalling, the step
## window (bounded against unbounded) with memory per concurrent request,
## decoding with and without id interning, and one ITL lookup.
bench-enginestep: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	python3 integrations/python/tools/bench_hook.py
	python3 integrations/python/tools/bench_send.py
	@if command -v valgrind >/dev/null; then python3 integrations/python/tools/bench_hook.py --instructions --engine vllm,sglang-overlap; \
	else echo "valgrind not installed: no instruction counts (apt-get install valgrind)"; fi
	$(GO) test -run '^$$' -bench '^BenchmarkReceive$$' -count $(BENCHCOUNT) ./receiver/enginestepreceiver | tee $(BENCH_OUT)/enginestep-receive.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/enginestep-receive.txt
	$(GO) test -run '^$$' -bench '^BenchmarkHandle$$' -count $(BENCHCOUNT) ./receiver/enginestepreceiver | tee $(BENCH_OUT)/enginestep-handle.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/enginestep-handle.txt
	$(GO) test -run '^$$' -bench '^BenchmarkWindow$$' -benchtime 100x -count $(BENCHCOUNT) ./internal/stepwindow | tee $(BENCH_OUT)/stepwindow.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/stepwindow.txt
	$(GO) test -run '^$$' -bench '^BenchmarkDecode$$' -count $(BENCHCOUNT) ./internal/stepwire | tee $(BENCH_OUT)/stepwire.txt
	$(BENCHSTAT) -col /impl $(BENCH_OUT)/stepwire.txt
	$(GO) test -run '^$$' -bench '^BenchmarkLookup$$' -count $(BENCHCOUNT) ./internal/stepwindow
