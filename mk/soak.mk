# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Soak and fault harness (e2e/soak) against the built collector on
# config/graphsignal.yaml. `make test` runs it for 30 s through `go test
# ./...`; `make soak` runs the long version without the race detector (the
# load generators would otherwise slow down) and writes its figures to
# $(SOAK_REPORT) for docs/reliability.md.
.PHONY: soak

SOAK_DURATION ?= 5m
SOAK_GOMEMLIMIT ?=
SOAK_REPORT ?= $(ROOT)/.soak/report.md

## soak: sustained load, a backend outage, a crash, malformed input and memory pressure (SOAK_DURATION, default 5m).
soak: build
	@mkdir -p $(dir $(SOAK_REPORT))
	INFERPROF_BIN=$(BIN) SOAK_DURATION=$(SOAK_DURATION) SOAK_GOMEMLIMIT=$(SOAK_GOMEMLIMIT) SOAK_REPORT=$(SOAK_REPORT) \
	  $(GO) test -count=1 -timeout 60m -run '^TestSoak$$' -v ./e2e/soak/
	@echo "figures in $(SOAK_REPORT)"
