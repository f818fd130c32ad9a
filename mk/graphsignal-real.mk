# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Graphsignal's own package (graphsignal 1.1.2, PyPI) next to the graphsignal
# exporter (exporter/graphsignalexporter/graphsignaltest/real/,
# docs/compatibility.md). Part of make test (TEST_TARGETS); about a minute
# with a warm venv and Go cache:
#  - the pinned venv under ~/.cache/inferprof/graphsignal-1.1.2-<hash>
#    (install.sh, built once per pin set);
#  - test_decode.py: the decoder refuses what the package would not write;
#  - the exporter's tests and the binary's Graphsignal e2e tests rerun with
#    the fake server saving every upload body, and decode.py reads each with
#    graphsignal.proto.signals_pb2 and the package's own names and rules;
#  - TestSignalsAgainstGraphsignal: /signals of the exporter and of the
#    package's own route code, fed the same signals, field by field.
GRAPHSIGNAL_REAL     := exporter/graphsignalexporter/graphsignaltest/real
GRAPHSIGNAL_BODIES   ?= $(ROOT)/bin/.graphsignal-bodies
GRAPHSIGNAL_E2E_RUN  ?= Graphsignal|Privacy|EngineMetrics|CrashWindow

.PHONY: test-graphsignal-real graphsignal-real-venv
TEST_TARGETS += test-graphsignal-real

graphsignal-real-venv:
	@$(GRAPHSIGNAL_REAL)/install.sh

test-graphsignal-real: build
	@mkdir -p $(SUMMARY)
	@set -eo pipefail; venv=$$($(GRAPHSIGNAL_REAL)/install.sh); \
	rm -rf $(GRAPHSIGNAL_BODIES); mkdir -p $(GRAPHSIGNAL_BODIES); \
	( cd $(GRAPHSIGNAL_REAL) && $$venv/bin/python -m unittest -v test_decode ) 2>&1 | tee $(SUMMARY)/graphsignal-real.log; \
	INFERPROF_GRAPHSIGNAL_VENV=$$venv INFERPROF_GRAPHSIGNAL_BODIES=$(GRAPHSIGNAL_BODIES) \
	  $(GO) test -race -count=1 ./exporter/graphsignalexporter/ 2>&1 | tee -a $(SUMMARY)/graphsignal-real.log; \
	INFERPROF_BIN=$(BIN) INFERPROF_GRAPHSIGNAL_BODIES=$(GRAPHSIGNAL_BODIES) \
	  $(GO) test -race -count=1 -run '$(GRAPHSIGNAL_E2E_RUN)' ./e2e/ 2>&1 | tee -a $(SUMMARY)/graphsignal-real.log; \
	$$venv/bin/python $(GRAPHSIGNAL_REAL)/decode.py $(GRAPHSIGNAL_BODIES) 2>&1 | tee -a $(SUMMARY)/graphsignal-real.log
