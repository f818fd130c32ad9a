#!/usr/bin/env bash
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Regenerates v0/graphsignal_v0.pb.go and v1/graphsignal_v1.pb.go from the .proto files.
# protoc-gen-go is the version pinned as a Go tool in go.mod; protoc comes from
# the system (Debian: apt-get install -y protobuf-compiler, 3.21.12 made the
# committed files).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v protoc >/dev/null 2>&1; then
  echo "graphsignalexporter: protoc not found; install it (Debian: apt-get install -y protobuf-compiler) to regenerate the Graphsignal protobuf code" >&2
  exit 1
fi
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
for v in v0 v1; do
  protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" -I "$v" \
    --go_out="$v" --go_opt=paths=source_relative "$v/graphsignal_$v.proto"
done
