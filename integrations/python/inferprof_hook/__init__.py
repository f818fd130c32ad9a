# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""inferprof engine step hook: one record per vLLM or SGLang scheduler step.

Enable it with `import inferprof_hook; inferprof_hook.install()`, or let
`inferprof-run` put the bundled sitecustomize on PYTHONPATH. It patches the
engine where a batch meets its output (vllm.py, sglang.py) when the engine
module is imported (or at once, if it already is), writes each step to a
shared-memory ring that the collector's engine_step receiver drains (or, as
the fallback, sends it as a Unix datagram), and never raises into the engine.

Environment:
  INFERPROF_STEP_ENDPOINT    socket path (default /tmp/inferprof/engine-step.sock)
  INFERPROF_STEP_RING_BYTES  ring size (default 4 MiB); 0 sends datagrams only
  INFERPROF_HOOK_DISABLED    1/true/yes/on turns the hook off
  INFERPROF_LAUNCH_WINDOWS   0/false/no/off: steps carry no launch windows
  OTEL_SERVICE_NAME          service.name of the step spans (default: engine name)
  OTEL_RESOURCE_ATTRIBUTES   its service.instance.id names the engine instance
"""

import importlib.abc
import importlib.util
import sys
import threading

from . import _state

__all__ = ["install", "stats", "patched"]
__version__ = "0.1.0"

# Module name -> patch function; each engine's step lives in one module.
_TARGETS = {}
_patched = {}
_lock = threading.Lock()
_installed = False


def _targets():
    if not _TARGETS:
        from . import sglang, vllm

        _TARGETS[vllm.MODULE] = vllm.patch
        _TARGETS[vllm.WORKER_MODULE] = vllm.patch_worker
        _TARGETS[sglang.MODULE] = sglang.patch
        _TARGETS[sglang.OVERLAP_MODULE] = sglang.patch_overlap_thread
    return _TARGETS


def _apply(name, module):
    """Runs the patch for module name; guarded, at most once per module object."""
    try:
        with _lock:
            if _patched.get(name) is module:
                return
            _patched[name] = module
        wrapped = _targets()[name](module)
        if wrapped:
            _state.logger.info("inferprof: engine step hook on %s (%s)", name, ", ".join(wrapped))
    except Exception:
        _state.fail_once("patch " + name, module)


class _Loader(importlib.abc.Loader):
    """Runs the wrapped loader, then patches the freshly executed module."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply(self._name, module)

    def __getattr__(self, attr):
        return getattr(self._loader, attr)


class _Finder(importlib.abc.MetaPathFinder):
    """Intercepts only the engine modules; every other import is untouched."""

    def __init__(self):
        self._busy = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _TARGETS or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        except Exception:
            return None
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, fullname)
        return spec


def install():
    """Enables the hook; safe to call more than once. Returns False when disabled."""
    global _installed
    try:
        if _state.disabled():
            return False
        with _lock:
            if _installed:
                return True
            _installed = True
            _targets()
            sys.meta_path.insert(0, _Finder())
        for name in list(_TARGETS):
            module = sys.modules.get(name)
            if module is not None:
                _apply(name, module)
        return True
    except Exception:
        _state.fail_once("install")
        return False


def stats():
    """Steps sent (to a ring or as datagrams) and dropped by this process so
    far, and the rings it set up."""
    sent, dropped = _state.counts()
    return {"sent": sent, "dropped": dropped, "rings": _state.rings_opened}


def patched():
    """Names of the engine modules patched so far."""
    return sorted(_patched)
