"""Process-wide hook state: configuration, the shared sender, one-time warnings."""

import logging
import os

from .sender import Sender

logger = logging.getLogger("inferprof_hook")

ENV_ENDPOINT = "INFERPROF_STEP_ENDPOINT"
ENV_DISABLED = "INFERPROF_HOOK_DISABLED"
DEFAULT_ENDPOINT = "/tmp/inferprof/engine-step.sock"

_warned = set()
_sender = None


def disabled():
    return os.environ.get(ENV_DISABLED, "").strip().lower() in ("1", "true", "yes", "on")


def endpoint():
    return os.environ.get(ENV_ENDPOINT) or DEFAULT_ENDPOINT


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


def _after_fork():
    if _sender is not None:
        _sender.reset_after_fork()


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


def version(dist):
    """The installed version of distribution dist, or "unknown"."""
    try:
        from importlib import metadata

        return metadata.version(dist)
    except Exception:
        return "unknown"
