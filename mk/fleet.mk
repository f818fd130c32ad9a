# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Agent and gateway tiers (config/agent.yaml, config/gateway.yaml, deploy/).
.PHONY: scale

SCALE_DURATION ?= 20s
SCALE_REPORT ?= $(ROOT)/.soak/scale.md

## scale: per-core throughput of the agent and gateway and the join window's memory, for docs/deployment.md (SCALE_DURATION per phase).
scale: build
	@mkdir -p $(dir $(SCALE_REPORT))
	INFERPROF_BIN=$(BIN) SCALE_DURATION=$(SCALE_DURATION) SCALE_REPORT=$(SCALE_REPORT) \
	  $(GO) test -count=1 -timeout 20m -run '^TestScaleTiers$$' -v ./e2e/soak/
	@echo "figures in $(SCALE_REPORT)"
