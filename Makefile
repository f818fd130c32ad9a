# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# inferprof: build, run and test the otelcol-inferprof distribution.
# Every tool comes from the Go module proxy at a pinned version.

SHELL      := /bin/bash
.DEFAULT_GOAL := build
GO         ?= go
ROOT       := $(CURDIR)
OCB_VERSION      := v0.161.0
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
# Each pinned tool lives in a folder named after its version, so a checkout
# that moves to another release builds with the matching ocb, never a stale one.
OCB        := $(ROOT)/.tools/ocb-$(OCB_VERSION)/builder
BENCHSTAT  := $(ROOT)/.tools/benchstat-$(BENCHSTAT_VERSION)/benchstat
BIN        := $(ROOT)/bin/otelcol-inferprof
DIST       := cmd/otelcol-inferprof
# go-nvml needs cgo; its NVML 13 headers warn about deprecations we do not call.
export CGO_ENABLED := 1
export CGO_CFLAGS  ?= -O2 -g -Wno-deprecated-declarations
# Short fuzz pass per fuzz target for `make fuzz`.
FUZZTIME   ?= 10s
# How many runs each benchmark gets for benchstat.
BENCHCOUNT ?= 6
BENCH_OUT  := $(ROOT)/.bench
# Each test stage leaves its results here for the summary `make test` ends with.
SUMMARY    := $(ROOT)/bin/.test-summary
TESTSUMMARY := $(ROOT)/bin/testsummary

# Each component keeps its own make fragment in mk/<component>.mk. A fragment
# appends to BENCH_TARGETS (run by `make bench`) and TEST_TARGETS (run by
# `make test` after the Go tests), so no one edits the shared rules below.
BENCH_TARGETS :=
TEST_TARGETS  :=
include $(wildcard mk/*.mk)

.PHONY: all build build-unlocked run install image deploy-configs test test-go test-python test-c test-summary-tool lint license-headers bench fuzz generate tools clean fmt vet

all: build

$(OCB):
	GOBIN=$(dir $(OCB)) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

$(BENCHSTAT):
	GOBIN=$(dir $(BENCHSTAT)) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

tools: $(OCB) $(BENCHSTAT)

## build: generate the distribution's sources with ocb and compile bin/otelcol-inferprof, plus bin/inferprof-run.
# A lock serialises concurrent builds (parallel test runs share $(DIST)).
build: $(OCB)
	@mkdir -p bin
	flock bin/.build.lock $(MAKE) --no-print-directory build-unlocked

build-unlocked:
	$(OCB) --config builder-config.yaml --skip-compilation
	cd $(DIST) && $(GO) build -trimpath -ldflags='-s -w' -o $(BIN) .
	$(GO) build -trimpath -o bin/inferprof-run ./cmd/inferprof-run
	@echo "built $(BIN) and bin/inferprof-run"

## run: build, then run on config/default.yaml (config/graphsignal.yaml when GRAPHSIGNAL_API_KEY is set).
run: build
	@if [ -n "$$GRAPHSIGNAL_API_KEY" ]; then cfg=config/graphsignal.yaml; else cfg=config/default.yaml; fi; \
	echo "running $(BIN) --config $$cfg"; \
	mkdir -p -m 700 "$${INFERPROF_ENGINE_TARGETS_DIR:-/tmp/inferprof/engines}"; \
	exec $(BIN) --config $$cfg

## test: every test: lint, Go (with -race; end-to-end against the built binary,
## and the docs check), Python and C; ends with a summary of what ran and what
## was skipped, and why. The stages run one after the other.
test: build
	@rm -rf $(SUMMARY)
	@$(MAKE) --no-print-directory lint test-go test-python test-c $(TEST_TARGETS)
	@$(TESTSUMMARY) report $(SUMMARY)

test-summary-tool:
	@mkdir -p $(SUMMARY)
	@$(GO) build -o $(TESTSUMMARY) ./cmd/testsummary

# go test -json feeds testsummary, which prints go test's usual output and
# records passes and skips (with their reasons) for the summary. The e2e
# tests send with the engines' own OpenTelemetry Python SDK, pinned in
# e2e/otelpy and cached under ~/.cache/inferprof.
test-go: test-summary-tool
	set -o pipefail; py=$$(e2e/otelpy/install.sh)/bin/python; \
	  INFERPROF_OTEL_PYTHON=$$py INFERPROF_BIN=$(BIN) $(GO) test -race -json -timeout 25m ./... | $(TESTSUMMARY) go $(SUMMARY)

test-python: test-summary-tool
	@if [ -d integrations/python ]; then set -o pipefail; \
	  cd integrations/python && python3 -m unittest discover -v 2>&1 | tee $(SUMMARY)/python.log; fi

test-c: test-summary-tool
	@if [ -f native/cupti/Makefile ]; then set -o pipefail; \
	  $(MAKE) --no-print-directory -C native/cupti test 2>&1 | tee $(SUMMARY)/c.log; fi

## lint: licence headers (policy in CONTRIBUTING.md), gofmt and go vet.
lint: test-summary-tool
	$(GO) run ./cmd/licenseheaders
	@files=$$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './.*' | sed 's|^\./||'); \
	out=$$(gofmt -l $$(echo "$$files" | grep -v '^$(DIST)/')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (make fmt):"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@touch $(SUMMARY)/lint.log

## license-headers: add the licence header to every file that lacks it.
license-headers:
	$(GO) run ./cmd/licenseheaders -fix

## install: the binaries, the engine step hook and (once `make native` built
## them) the CUPTI library builds under $(PREFIX), laid out as inferprof-run
## looks for them: bin/, lib/cuda<major>/, share/inferprof/python/.
PREFIX ?= /usr/local
install: build
	install -D -m 0755 bin/otelcol-inferprof $(DESTDIR)$(PREFIX)/bin/otelcol-inferprof
	install -D -m 0755 bin/inferprof-run $(DESTDIR)$(PREFIX)/bin/inferprof-run
	mkdir -p $(DESTDIR)$(PREFIX)/share/inferprof/python
	cp -r integrations/python/bootstrap integrations/python/inferprof_hook $(DESTDIR)$(PREFIX)/share/inferprof/python/
	rm -rf $(DESTDIR)$(PREFIX)/share/inferprof/python/*/__pycache__
	@found=; for lib in native/cupti/build/libinferprof_cupti.so native/cupti/build/cuda*/libinferprof_cupti.so; do \
	  [ -f "$$lib" ] || continue; found=1; \
	  dest=$(DESTDIR)$(PREFIX)/lib/$${lib#native/cupti/build/}; \
	  install -D -m 0755 "$$lib" "$$dest" && echo "installed $$dest"; \
	done; \
	[ -n "$$found" ] || echo "install: no libinferprof_cupti.so under native/cupti/build (make native); inferprof-run will run without it"

## image: the container image (Dockerfile) as $(IMAGE); needs a running Docker engine.
IMAGE ?= ghcr.io/inferprof/otelcol-inferprof:$(shell sed -n 's/^  version: *//p' builder-config.yaml)
image:
	@if ! command -v docker >/dev/null 2>&1; then \
	  echo "make image: no docker command here, so no image was built. Build the Dockerfile with any OCI builder, e.g. buildah bud -t $(IMAGE) ." >&2; exit 2; fi
	@if ! docker info >/dev/null 2>&1; then \
	  echo "make image: docker is installed but no Docker engine answers (docker info failed), so no image was built. Start dockerd, or build the Dockerfile with another OCI builder, e.g. buildah bud -t $(IMAGE) ." >&2; exit 2; fi
	docker build -t $(IMAGE) .

## deploy-configs: copy config/agent.yaml and config/gateway.yaml into deploy/.
deploy-configs:
	sh deploy/sync-configs.sh

## bench: every benchmark, each compared with its baseline through benchstat.
bench: $(BENCHSTAT) $(BENCH_TARGETS)

## fuzz: a short fuzz pass ($(FUZZTIME)) over every Fuzz target in the module.
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./$(DIST)/'); do \
	  pkg=./$$(dirname $$f); \
	  for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## generate: mdatagen for every component (pinned as a Go tool), protobuf code, ocb sources.
generate:
	$(GO) generate ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^$(DIST)/')

clean:
	rm -rf bin $(BENCH_OUT) $(DIST)/otelcol-inferprof

