#!/usr/bin/env bash
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Builds the pinned virtualenv of the real agent SDKs make agents-real runs
# (openai-agents with contrib's and OpenInference's instrumentations,
# LangGraph with OpenLLMetry's) and prints its path. It lives outside the clone, under
# ~/.cache/inferprof/agents-<hash of the pins>, so runs on one machine share
# it and a pin change makes a new one; used only once complete (.complete).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${INFERPROF_CACHE:-$HOME/.cache/inferprof}
python=${INFERPROF_E2E_PYTHON:-python3.11}
uv_version=0.9.30

key=$(cat "$here/requirements.txt" "$here/constraints.txt" "$here/install.sh" | sha256sum | cut -c1-12)
venv=$cache/agents-$key
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
"$uv" pip install -q --python "$venv/bin/python" -r "$here/requirements.txt" -c "$here/constraints.txt" >&2
touch "$venv/.complete"
echo "$venv"
