# inferprof: build, run and test the otelcol-inferprof distribution.
# Every tool comes from the Go module proxy at a pinned version.

SHELL      := /bin/bash
.DEFAULT_GOAL := build
GO         ?= go
ROOT       := $(CURDIR)
TOOLS      := $(ROOT)/.tools/bin
OCB_VERSION      := v0.165.0
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
OCB        := $(TOOLS)/builder
BENCHSTAT  := $(TOOLS)/benchstat
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

# Each component keeps its own make fragment in mk/<component>.mk. A fragment
# appends to BENCH_TARGETS (run by `make bench`) and TEST_TARGETS (run by
# `make test` after the Go tests), so no one edits the shared rules below.
BENCH_TARGETS :=
TEST_TARGETS  :=
include $(wildcard mk/*.mk)

.PHONY: all build build-unlocked run test test-go test-e2e test-python test-c bench fuzz generate tools clean fmt vet

all: build

$(OCB):
	GOBIN=$(TOOLS) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

$(BENCHSTAT):
	GOBIN=$(TOOLS) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

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
	exec $(BIN) --config $$cfg

## test: every test: Go (with -race), end-to-end against the built binary, Python and C.
test: build test-go test-python test-c $(TEST_TARGETS)

test-go:
	INFERPROF_BIN=$(BIN) $(GO) test -race -timeout 25m ./...

test-python:
	@if [ -d integrations/python ]; then cd integrations/python && python3 -m unittest discover -v; fi

test-c:
	@if [ -f native/cupti/Makefile ]; then $(MAKE) -C native/cupti test; fi

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

