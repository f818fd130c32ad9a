# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Loads the inferprof engine step hook at interpreter start.

inferprof-run puts this folder on PYTHONPATH. The folder stays there on
purpose: vLLM and SGLang run their engine loops in child processes, which
must load the hook too (install() is idempotent). Any sitecustomize that this
one shadows is still run afterwards. Nothing here may raise into the host.
"""


def _load():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        root = os.path.dirname(here)
        if root not in sys.path:
            sys.path.append(root)
        import inferprof_hook

        inferprof_hook.install()
    except Exception:  # the host program must start regardless
        import logging

        logging.getLogger("inferprof_hook").warning(
            "inferprof: could not load the engine step hook", exc_info=True)
    # Chain to the sitecustomize we shadowed, if there is one.
    try:
        import importlib

        saved = list(sys.path)
        me = sys.modules.pop("sitecustomize", None)
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        try:
            importlib.import_module("sitecustomize")
        except ImportError:
            pass
        finally:
            sys.path[:] = saved
            if me is not None:
                sys.modules["sitecustomize"] = me
    except Exception:
        pass


_load()
del _load
