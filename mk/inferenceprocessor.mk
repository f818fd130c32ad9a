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

.PHONY: bench-inference-compare
BASE ?= main

## bench-inference-compare: the processor's cost before and after a change,
## in the same run: BenchmarkPipeline (processor + connector, what
## bench-inference runs) and BenchmarkProcessor of BASE (a git revision,
## default main) and of this tree, interleaved BENCHCOUNT times on the same
## inputs (BASE's testdata), then benchstat old vs new.
bench-inference-compare: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	@rm -rf $(BENCH_OUT)/base; git worktree prune
	git worktree add -f --detach $(BENCH_OUT)/base $(BASE)
	cd $(BENCH_OUT)/base && $(GO) test -c -o $(BENCH_OUT)/base-conn.test ./connector/inferencemetricsconnector/ \
	  && $(GO) test -c -o $(BENCH_OUT)/base-proc.test ./processor/inferenceprocessor/
	$(GO) test -c -o $(BENCH_OUT)/new-conn.test ./connector/inferencemetricsconnector/
	$(GO) test -c -o $(BENCH_OUT)/new-proc.test ./processor/inferenceprocessor/
	@rm -f $(BENCH_OUT)/cmp-*.txt
	@set -e; for i in $$(seq $(BENCHCOUNT)); do for v in base new; do \
	  (cd $(BENCH_OUT)/base/connector/inferencemetricsconnector && $(BENCH_OUT)/$$v-conn.test -test.run '^$$' \
	    -test.bench '^BenchmarkPipeline$$/spans=1000/impl=ours' -test.count 1) >> $(BENCH_OUT)/cmp-pipeline-$$v.txt; \
	  (cd $(BENCH_OUT)/base/processor/inferenceprocessor && $(BENCH_OUT)/$$v-proc.test -test.run '^$$' \
	    -test.bench '^BenchmarkProcessor$$/spans=1000/' -test.cpu 1 -test.count 1) >> $(BENCH_OUT)/cmp-proc-$$v.txt; \
	done; done
	git worktree remove --force $(BENCH_OUT)/base
	$(BENCHSTAT) $(BENCH_OUT)/cmp-pipeline-base.txt $(BENCH_OUT)/cmp-pipeline-new.txt
	$(BENCHSTAT) $(BENCH_OUT)/cmp-proc-base.txt $(BENCH_OUT)/cmp-proc-new.txt

.PHONY: bench-inference-instructions

## bench-inference-instructions: instructions per request span (callgrind)
## of BenchmarkPipeline for BASE and this tree, phase spans on and off.
bench-inference-instructions:
	@mkdir -p $(BENCH_OUT)
	@rm -rf $(BENCH_OUT)/base; git worktree prune
	git worktree add -f --detach $(BENCH_OUT)/base $(BASE)
	cd $(BENCH_OUT)/base && $(GO) test -c -o $(BENCH_OUT)/base-conn.test ./connector/inferencemetricsconnector/
	git worktree remove --force $(BENCH_OUT)/base
	$(GO) test -c -o $(BENCH_OUT)/new-conn.test ./connector/inferencemetricsconnector/
	@cd connector/inferencemetricsconnector && for impl in ours ours_no_phase_spans; do for v in base new; do \
	  printf '%s ' $$v; $(ROOT)/mk/instructions.sh $(BENCH_OUT)/$$v-conn.test $$impl; done; done
