"""The compiler's passes run with Python's cyclic garbage collector paused.

Parsing, verifying and lowering a kernel allocate tens of thousands of short-lived container objects (lark trees,
IR ops, llvmlite instructions); each allocation burst triggers generation-0/1 collections, and one in a few triggers
a full collection that walks every live object of the process (numpy, torch, the op tables). Those walks free
almost nothing during a compile: what becomes garbage is released by reference counting, and the few reference
cycles (llvmlite values and their parents) wait for the next ordinary collection after the pause.
"""
from __future__ import annotations

import functools
import gc


def gc_paused(fn):
    """``fn`` with the cyclic collector disabled while it runs (restored after, exception or not).

    >>> @gc_paused
    ... def lower(kernel): ...

    Post: ``gc.isenabled()`` after the call is what it was before (a nested or concurrent pause never re-enables a
    collector that was already off when it began)."""

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused
