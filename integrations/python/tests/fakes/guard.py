# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Token containers whose length may be read but whose values may not.

The fakes keep prompt and output tokens in Guarded lists, so a test proves
the hook never reads a token value: reading one raises and is counted.
"""


class Guarded(list):
    """A token list whose length may be read but whose values may not."""

    reads = 0

    def _deny(self, *a, **k):
        Guarded.reads += 1
        raise AssertionError("token values were read")

    __iter__ = _deny
    __getitem__ = _deny
    __contains__ = _deny
    __repr__ = _deny


def tokens(n):
    """n placeholder token values, guarded."""
    return Guarded([0] * n)


def grow(lst, n):
    """Appends n tokens to a guarded list without reading it."""
    list.extend(lst, [0] * n)
