#!/usr/bin/env bash
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Builds the pinned graphsignal 1.1.2 virtualenv and prints its path. It lives
# outside the clone, under ~/.cache/inferprof/graphsignal-1.1.2-<hash of the
# pins>, so CI on the same machine reuses it and a pin change makes a new one;
# a venv is used only once its install finished (the .complete marker). uv is
# the one e2e/vllm/install.sh pins.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${INFERPROF_CACHE:-$HOME/.cache/inferprof}
python=${INFERPROF_GRAPHSIGNAL_PYTHON:-python3.11}
uv_version=0.9.30

key=$(cat "$here/requirements.txt" "$here/install.sh" | sha256sum | cut -c1-12)
venv=$cache/graphsignal-1.1.2-$key
if [ -f "$venv/.complete" ]; then
  echo "$venv"
  exit 0
fi
mkdir -p "$cache"
command -v "$python" >/dev/null || { echo "install.sh: $python not found" >&2; exit 1; }

uv=$cache/uv-$uv_version/bin/uv
if [ ! -x "$uv" ]; then
  "$python" -m venv "$cache/uv-$uv_version" >&2
  "$cache/uv-$uv_version/bin/pip" install -q "uv==$uv_version" >&2
fi

rm -rf "$venv"
"$uv" venv -q --python "$python" "$venv" >&2
# --no-deps: every package is pinned in requirements.txt, none resolved anew.
"$uv" pip install -q --python "$venv/bin/python" --no-deps -r "$here/requirements.txt" >&2
"$venv/bin/python" -c 'import graphsignal.proto.signals_pb2, graphsignal.signals.routes' >&2

touch "$venv/.complete"
echo "$venv"
