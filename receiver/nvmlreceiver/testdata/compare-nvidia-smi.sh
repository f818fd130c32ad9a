#!/usr/bin/env bash
# Compare the nvml receiver with nvidia-smi on a machine with an NVIDIA driver (e.g. an H200).
# Usage, from the repository root:  receiver/nvmlreceiver/testdata/compare-nvidia-smi.sh
# Prints nvidia-smi's view, then a markdown table (paste it into the receiver README) and PASS/FAIL.
set -euo pipefail
nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.total,power.draw,temperature.gpu,clocks.sm --format=csv
export CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
exec go test -tags gpu -count=1 -run '^TestAgainstNvidiaSmi$' -v ./receiver/nvmlreceiver/
