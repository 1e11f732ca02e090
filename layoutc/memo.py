"""Memoisation of the pure layout operations.

Layouts, swizzles and tilers are immutable values, so every algebra result can be reused; GMMA-sized kernels
ask for the same compositions and divides many times while building partitions.
"""
from __future__ import annotations

from functools import lru_cache, wraps

from .errors import LayoutError
from .int_tuple import MAX_DEPTH

_CACHES = []


def pure(fn):
    """Decorate a pure layout operation so equal (hashable) arguments reuse the first result.

    Post: results are identical to the undecorated function's; unhashable arguments bypass the cache. An operand
    nested so deeply (far past MAX_DEPTH, only buildable by wrapping layouts in Python) that the operation runs out of
    Python stack raises LayoutError, not RecursionError.
    """
    cached = lru_cache(maxsize=16384)(fn)
    _CACHES.append(cached)

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return cached(*args, **kwargs)
        except TypeError:
            # Hashing happens inside the cache: only an unhashable argument takes the uncached path;
            # a TypeError raised by the operation itself propagates.
            try:
                hash((args, tuple(kwargs.items())))
            except TypeError:
                return fn(*args, **kwargs)
            raise
        except RecursionError:
            raise LayoutError(fn.__name__, args, f"operands nested too deeply to compute (layoutc accepts at most "
                              f"{MAX_DEPTH} levels of nesting)") from None

    wrapper.uncached = fn
    return wrapper


def clear_caches() -> None:
    """Forget every memoised result (for benchmarks that want cold numbers)."""
    for c in _CACHES:
        c.cache_clear()
