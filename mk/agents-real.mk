# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Real agent SDKs against the real (tiny, CPU) vLLM (e2e/agents/, docs/agents.md).
#  - make agents-real: the pinned agents venv (e2e/agents/install.sh) and the
#    vLLM venv of make e2e-vllm, one vLLM for all SDKs, each SDK's small
#    agent in turn; records into AGENTS_REAL_OUT and replays the recordings
#    through the binary (TestAgentsRecorded). Run by .ci/run; not in make test.
#  - TestAgentsRecorded on the committed e2e/agents/testdata runs in make test
#    (the e2e Go tests); no venv, no vLLM.
AGENTS_REAL_OUT ?= $(ROOT)/bin/agents-real

.PHONY: agents-real agents-real-venv

agents-real-venv:
	@e2e/agents/install.sh >/dev/null

agents-real: build
	@vllm=$$(e2e/vllm/install.sh) && agents=$$(e2e/agents/install.sh) && rm -rf $(AGENTS_REAL_OUT) && \
	  timeout 1500 python3 e2e/agents/run.py --vllm-venv $$vllm --agents-venv $$agents --out $(AGENTS_REAL_OUT) && \
	  INFERPROF_AGENTS_RECORDINGS=$(AGENTS_REAL_OUT) INFERPROF_BIN=$(BIN) $(GO) test -count=1 -run 'TestAgentsRecorded' ./e2e/
