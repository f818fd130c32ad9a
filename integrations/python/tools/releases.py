# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Engine release sources for hook_compat.py: fetched from PyPI with pip,
read without installing anything.

A release's sdist is found by pip's own index code (the configured index,
as `pip download` finds it) and downloaded by pip's downloader, then its
sha256 is checked against the one the index lists. `pip download` itself
cannot be used: for an sdist it builds the metadata first, which for vLLM
installs torch into a build environment. Only the Python files under the
folders the hook reads are kept, in

  $INFERPROF_CACHE/<engine>-releases/<version>/   (default ~/.cache/inferprof)

with the sdist's sha256 in .sha256 once complete, so a second run reads
the cache and needs no network.
"""

import hashlib
import os
import shutil
import tarfile
import tempfile
import zipfile

CACHE = os.environ.get("INFERPROF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "inferprof")

# Per engine: the distribution name and the folders of its package kept
# from each release (everything the patch table names lives in them).
KEEP = {
    "vllm": ("vllm", ("vllm/v1/", "vllm/version.py", "vllm/worker/worker_base.py")),
    "sglang": ("sglang", ("sglang/srt/managers/", "sglang/srt/observability/", "sglang/srt/tracing/",
                          "sglang/srt/distributed/parallel_state_wrapper.py",
                          "sglang/srt/layers/dp_attention.py", "sglang/srt/model_executor/forward_batch_info.py",
                          "sglang/srt/mem_cache/", "sglang/srt/runtime_context", "sglang/version.py")),
}


def release_dir(engine, version):
    return os.path.join(CACHE, engine + "-releases", version)


def _keep_key(engine):
    """Names the KEEP list in the cache marker, so a release kept with
    another list is fetched again."""
    return hashlib.sha256(repr(KEEP[engine]).encode()).hexdigest()[:12]


def cached(engine, version):
    """The release's source folder if it is complete in the cache (kept
    with the current KEEP list), else None."""
    d = release_dir(engine, version)
    try:
        with open(os.path.join(d, ".sha256")) as f:
            marker = f.read()
    except OSError:
        return None
    return d if "keep=" + _keep_key(engine) in marker else None


class _Pip:
    """pip's index finder and downloader, built as `pip download` builds them."""

    def __init__(self):
        from pip._internal.commands import create_command
        from pip._internal.network.download import Downloader

        self._cmd = create_command("download")
        options, _ = self._cmd.parse_args(["--no-deps"])
        self._ctx = self._cmd.main_context()
        self._ctx.__enter__()
        session = self._cmd.get_default_session(options)
        self._finder = self._cmd._build_package_finder(options=options, session=session)
        self._download = Downloader(session, progress_bar="off")
        self._candidates = {}

    def candidates(self, dist):
        if dist not in self._candidates:
            self._candidates[dist] = self._finder.find_all_candidates(dist)
        return self._candidates[dist]

    def versions(self, dist):
        """Final releases on the index, oldest first."""
        vs = {c.version for c in self.candidates(dist) if not c.version.is_prerelease}
        return [str(v) for v in sorted(vs)]

    def sdist(self, dist, version):
        """pip's Link to the release's sdist (a wheel when there is none)."""
        links = [c.link for c in self.candidates(dist) if str(c.version) == version]
        for suffix in (".tar.gz", ".whl"):
            for link in links:
                if link.filename.endswith(suffix):
                    return link
        raise LookupError("%s %s: no sdist or wheel on the index" % (dist, version))

    def fetch(self, link, where):
        path, _ = self._download(link, where)
        return path


_pip = None


def pip():
    global _pip
    if _pip is None:
        _pip = _Pip()
    return _pip


def fetch(engine, version, log=print):
    """The release's source folder, downloading it when not cached."""
    d = cached(engine, version)
    if d:
        return d
    dist, keep = KEEP[engine]
    link = pip().sdist(dist, version)
    with tempfile.TemporaryDirectory() as tmp:
        path = pip().fetch(link, tmp)
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
        if link.hash_name == "sha256" and link.hash and link.hash != digest:
            raise ValueError("%s: sha256 %s, the index says %s" % (link.filename, digest, link.hash))
        d = release_dir(engine, version)
        part = d + ".part"
        shutil.rmtree(part, ignore_errors=True)
        n = _extract(path, part, keep)
        with open(os.path.join(part, ".sha256"), "w") as f:
            f.write("%s  %s keep=%s\n" % (digest, link.filename, _keep_key(engine)))
        shutil.rmtree(d, ignore_errors=True)
        os.rename(part, d)
    log("fetched %s (%d files kept)" % (link.filename, n))
    return d


def _extract(path, dest, keep):
    """Copies the .py files under keep from an sdist or wheel into dest."""
    n = 0
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.endswith(".py") and name.startswith(keep):
                    _write(dest, name, z.read(name))
                    n += 1
        return n
    with tarfile.open(path) as t:
        for m in t:
            # sdist members are <name>-<version>/<path>
            rel = m.name.split("/", 1)[1] if "/" in m.name else ""
            if m.isfile() and rel.endswith(".py") and rel.startswith(keep):
                _write(dest, rel, t.extractfile(m).read())
                n += 1
    return n


def _write(dest, rel, data):
    if ".." in rel.split("/"):
        return
    p = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
