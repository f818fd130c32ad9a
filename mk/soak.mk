# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Soak and fault harness (e2e/soak) against the built collector on
# config/graphsignal.yaml. It saturates the machine, so it runs alone:
# `make test` runs 30 s of it after the other tests (test-soak); `make soak`
# runs SOAK_DURATION without the race detector (which would slow the load
# generators) and writes its figures to $(SOAK_REPORT) for
# docs/reliability.md. Plain `go test ./...` skips it.
#
# The collector gets a 1 GiB budget the way docs/deployment.md says to give
# it one outside a container: INFERPROF_MEMORY_LIMIT_MIB and GOMEMLIMIT at
# 80% of it. SOAK_GOMEMLIMIT=off (or another value) measures the collector
# without (or with another) GOMEMLIMIT, SOAK_SPIKE_MIB with another spike
# limit (e.g. 320 with SOAK_GOMEMLIMIT=640MiB: the process then stays under
# limit_mib itself, docs/deployment.md); SOAK_PHASES=memory (a comma-separated
# list of load, outage, malformed, crash, memory) runs only those phases.
.PHONY: soak test-soak

TEST_TARGETS += test-soak

test-soak: build
	@mkdir -p $(SUMMARY)
	set -o pipefail; INFERPROF_BIN=$(BIN) SOAK_DURATION=30s $(GO) test -race -count=1 -timeout 20m -run '^TestSoak$$' ./e2e/soak/ 2>&1 | tee $(SUMMARY)/soak.log

SOAK_DURATION ?= 5m
SOAK_GOMEMLIMIT ?=
SOAK_SPIKE_MIB ?=
SOAK_PHASES ?=
SOAK_REPORT ?= $(ROOT)/.soak/report.md

## soak: sustained load, a backend outage, a crash, malformed input and memory pressure (SOAK_DURATION, default 5m).
soak: build
	@mkdir -p $(dir $(SOAK_REPORT))
	INFERPROF_BIN=$(BIN) SOAK_DURATION=$(SOAK_DURATION) SOAK_GOMEMLIMIT=$(SOAK_GOMEMLIMIT) SOAK_SPIKE_MIB=$(SOAK_SPIKE_MIB) SOAK_PHASES=$(SOAK_PHASES) SOAK_REPORT=$(SOAK_REPORT) \
	  $(GO) test -count=1 -timeout 60m -run '^TestSoak$$' -v ./e2e/soak/
	@echo "figures in $(SOAK_REPORT)"
