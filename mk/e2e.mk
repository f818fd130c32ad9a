# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# End-to-end CPU of the per-span path (issue 16): the built collector's CPU
# per 100,000 vLLM request spans on config/default.yaml against a stock
# otlp -> span_metrics pipeline run by the same binary
# (e2e/pipeline_bench_test.go). The two configurations alternate which goes
# first, one process each per run, BENCHCOUNT runs; benchstat prints default
# as a ratio of span_metrics, and mk/ratio.sh the ratio of the CPU medians
# (sec/op is the wall clock of a round, waits included, not the figure).
.PHONY: bench-e2e
BENCH_TARGETS += bench-e2e
BENCH_E2E_ROUNDS ?= 2x

## bench-e2e: the default pipeline's CPU per 100k vLLM spans against otlp -> span_metrics, alternated.
bench-e2e: build $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -c -o $(BENCH_OUT)/e2e.test ./e2e/
	@rm -f $(BENCH_OUT)/e2e-pipeline.txt
	@set -eo pipefail; for i in $$(seq $(BENCHCOUNT)); do \
	  if [ $$((i % 2)) = 0 ]; then order=reverse; else order=; fi; \
	  (cd e2e && INFERPROF_BIN=$(BIN) BENCH_E2E_ORDER=$$order $(BENCH_OUT)/e2e.test -test.run '^$$' \
	    -test.bench '^BenchmarkPipelineCPU$$' -test.benchtime $(BENCH_E2E_ROUNDS) -test.count 1 -test.timeout 30m) \
	    | tee -a $(BENCH_OUT)/e2e-pipeline.txt; \
	done
	$(BENCHSTAT) -col '/config@(span_metrics default default_no_phase_spans)' $(BENCH_OUT)/e2e-pipeline.txt
	@mk/ratio.sh config span_metrics $(BENCH_OUT)/e2e-pipeline.txt cpu-ms/100k-spans

# The same figure before and after a change, in one run: BASE (a git
# revision) is built in a worktree with its own configs and e2e tests; the
# two binaries alternate, each with its stock span_metrics pipeline beside it,
# so benchstat compares default against default and each run keeps its own
# ratio to the stock pipeline.
.PHONY: bench-e2e-compare
BENCH_E2E_CONFIGS ?= span_metrics|default

## bench-e2e-compare: bench-e2e of BASE (default main) and of this tree, alternated BENCHCOUNT times.
bench-e2e-compare: build $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	@rm -rf $(BENCH_OUT)/e2e-base; git worktree prune
	git worktree add -f --detach $(BENCH_OUT)/e2e-base $(BASE)
	ln -sfn $(ROOT)/.tools $(BENCH_OUT)/e2e-base/.tools
	$(MAKE) --no-print-directory -C $(BENCH_OUT)/e2e-base build
	cd $(BENCH_OUT)/e2e-base && $(GO) test -c -o $(BENCH_OUT)/base-e2e.test ./e2e/
	$(GO) test -c -o $(BENCH_OUT)/new-e2e.test ./e2e/
	@rm -f $(BENCH_OUT)/cmp-e2e-*.txt
	@set -eo pipefail; for i in $$(seq $(BENCHCOUNT)); do \
	  if [ $$((i % 2)) = 0 ]; then order=reverse; vs="new base"; else order=; vs="base new"; fi; \
	  for v in $$vs; do \
	    if [ $$v = base ]; then root=$(BENCH_OUT)/e2e-base; else root=$(ROOT); fi; \
	    (cd $$root/e2e && INFERPROF_BIN=$$root/bin/otelcol-inferprof BENCH_E2E_ORDER=$$order $(BENCH_OUT)/$$v-e2e.test \
	      -test.run '^$$' -test.bench '^BenchmarkPipelineCPU$$/config=($(BENCH_E2E_CONFIGS))$$' \
	      -test.benchtime $(BENCH_E2E_ROUNDS) -test.count 1 -test.timeout 30m) | tee -a $(BENCH_OUT)/cmp-e2e-$$v.txt; \
	  done; \
	done
	git worktree remove --force $(BENCH_OUT)/e2e-base
	$(BENCHSTAT) -filter '/config:default' $(BENCH_OUT)/cmp-e2e-base.txt $(BENCH_OUT)/cmp-e2e-new.txt
	@echo "base:"; mk/ratio.sh config span_metrics $(BENCH_OUT)/cmp-e2e-base.txt cpu-ms/100k-spans
	@echo "new:"; mk/ratio.sh config span_metrics $(BENCH_OUT)/cmp-e2e-new.txt cpu-ms/100k-spans
