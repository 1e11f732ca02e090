"""A layout tabulated over its domain with numpy: the one evaluation of whole layouts and TV maps that the verifier,
the interpreter, the reduction plan and the lowering's plans share (a TV layout of 16K points is too many to
evaluate point by point).

``layout_values((4,2):(2,1))`` → ``[0 2 4 6 1 3 5 7]``; ``tv_index((2,2):(1,2))`` → ``[[0, 2], [1, 3]]``.
"""
from __future__ import annotations

import numpy as np

import layoutc as lc


def tv_parts(tv) -> tuple:
    """(swizzle or None, offset, TV Layout) of a thread-value map: ``Sw<3,3,-6> o 0 o L`` → (Sw, 0, L),
    ``L`` → (None, 0, L). Post: ``tv(t, v) == sw(offset + L(t, v))`` (without the swizzle where it is None)."""
    if isinstance(tv, lc.ComposedLayout):
        return tv.outer, tv.offset, tv.inner
    return None, 0, tv


def layout_values(layout, indices=None) -> np.ndarray:
    """``[layout(i) for i in range(size(layout))]`` as an int64 array, computed mode by mode.
    ``(4,2):(2,1)`` → ``[0 2 4 6 1 3 5 7]``. With ``indices`` (an int array of 1-D coordinates), ``layout`` at those
    only, in their shape: what a large layout needs (a table of all its values would not fit in memory). A swizzled
    map ``Sw o offset o L`` is the swizzle of ``offset + L``'s values. Post: equal to the point-by-point evaluation,
    ``layout_values(L)[i] == L(i)``."""
    if isinstance(layout, lc.ComposedLayout):
        sw, offset, inner = tv_parts(layout)
        return sw(offset + layout_values(inner, indices))
    flat = lc.flatten(layout)
    shapes = flat.shape if isinstance(flat.shape, tuple) else (flat.shape,)
    strides = flat.stride if isinstance(flat.stride, tuple) else (flat.stride,)
    idx = np.arange(lc.size(layout), dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64)
    out = np.zeros_like(idx)
    prefix = 1
    for s, d in zip(shapes, strides):
        out += (idx // prefix) % s * d
        prefix *= s
    return out


def tv_index(tv) -> np.ndarray:
    """(threads, values) array of the tile index ``tv(t, v)`` of a TV layout or a swizzled one (``Sw o offset o TV``:
    the swizzle of ``offset + TV(t, v)``). ``Sw<1,0,-2> o 0 o (2,2):(1,2)`` → ``[[0, 2], [5, 7]]`` (thread 1's
    indices 1 and 3 get bit 2 from their bit 0). Post: shape ``(size(TV[0]), size(TV[1]))``, entry [t, v] ==
    ``tv((t, v))``."""
    sw, offset, inner = tv_parts(tv)
    index = layout_values(inner[0])[:, None] + layout_values(inner[1])[None, :]
    return index if sw is None else sw(offset + index)
