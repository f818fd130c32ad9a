#!/bin/sh
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# instructions.sh TEST_BINARY IMPL: instructions per request span of
# BenchmarkPipeline/spans=1000/impl=IMPL (the connector's test binary),
# counted by callgrind: (40 rounds - 10 rounds) / 30 / 1000, so the setup
# cancels. Deterministic to a few instructions, where wall-clock time on a
# shared VM moves by 10-30 %. Run from connector/inferencemetricsconnector.
set -eu
bin=$1 impl=$2
ir() {
	GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$bin" -test.run '^$' -test.bench "^BenchmarkPipeline\$/spans=1000/impl=$impl\$" \
		-test.benchtime "$1" -test.cpu 1 2>&1 | awk '/Collected/ {print $4}'
}
a=$(ir 40x)
b=$(ir 10x)
echo "$impl $(( (a - b) / 30000 ))"
