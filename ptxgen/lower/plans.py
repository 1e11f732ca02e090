"""Static plans the lowering derives from layouts (no LLVM here; pure functions of layouts, cached).

Everything is computed with layoutc from the op's TV layout and tile shape, and cross-checked against the
layouts' own tables (``layout_table``), so a plan is never hand-written index arithmetic:

- ``tile_coordinates(tv, tile)``: per tile mode m, the layout ``C_m ∘ TV`` where ``C_m`` maps a tile index to its
  mode-m coordinate. A layout is additive over its modes, so the coordinate of (t, v) is ``G_m[0](t) + G_m[1](v)``:
  the thread part is evaluated at run time (``emit_layout``), the value part is a constant per value.
- ``plan_access``: how a thread's values of a gmem.load/store group into vectors along the contiguous mode.
- ``plan_reduce`` (defined in ``ptxgen.ir.reduce_plan``, where the verifier and the shared-memory plan use it too):
  which of a thread's values share a row (column), the xor lane and warp masks of the butterflies.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import layoutc as lc

from ..ir.reduce_plan import ReducePlan, ReducePlanError, plan_reduce  # noqa: F401  (the lowering's plans in one place)


def flat(t) -> list:
    """The leaves of an int tuple, colexicographic order: ``flat(((2,3),4)) == [2, 3, 4]``."""
    if isinstance(t, tuple):
        out = []
        for x in t:
            out.extend(flat(x))
        return out
    return [t]


def mode_sizes(shape) -> list:
    """Per top-level mode of a tile shape, its size (a nested mode's coordinate is linearised within the mode)."""
    modes = shape if isinstance(shape, tuple) else (shape,)
    return [lc.product(m) for m in modes]


def layout_table(layout) -> np.ndarray:
    """``[layout(i) for i in range(size(layout))]`` as an int64 array, evaluated mode by mode."""
    shapes, strides = flat(lc.shape(layout)), flat(lc.stride(layout))
    n = int(np.prod(shapes)) if shapes else 1
    idx = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for s, d in zip(shapes, strides):
        out += (idx % s) * d
        idx //= s
    return out


def coordinate_layout(tile_shape, m: int) -> lc.Layout:
    """The layout mapping a tile index (colexicographic over the tile's modes) to its mode-``m`` coordinate."""
    sizes = mode_sizes(tile_shape)
    return lc.Layout(tuple(sizes), tuple(1 if k == m else 0 for k in range(len(sizes))))


@dataclass(frozen=True)
class ModeCoords:
    """The mode-m tile coordinate of (t, v): ``thread(t) + values[v]`` (``thread`` a layout, ``values`` ints)."""

    thread: object
    values: tuple


@functools.lru_cache(maxsize=512)
def tile_coordinates(tv, tile_shape):
    """Per tile mode, ``ModeCoords`` from ``composition(C_m, tv)``; None when a composition is not admissible or
    disagrees with the tables (then the lowering decodes coordinates from the tile index at run time)."""
    nt, nv = lc.size(tv[0]), lc.size(tv[1])
    index = layout_table(tv[0])[:, None] + layout_table(tv[1])[None, :]
    sizes = mode_sizes(tile_shape)
    out = []
    prefix = 1
    for m, s in enumerate(sizes):
        want = (index // prefix) % s
        prefix *= s
        try:
            g = lc.composition(coordinate_layout(tile_shape, m), tv)
        except lc.LayoutError:
            return None
        if lc.rank(g) != 2 or lc.size(g[0]) != nt or lc.size(g[1]) != nv:
            return None
        gt, gv = layout_table(g[0]), layout_table(g[1])
        if not np.array_equal(gt[:, None] + gv[None, :], want):
            return None
        out.append(ModeCoords(g[0], tuple(int(x) for x in gv)))
    return tuple(out)


@dataclass(frozen=True)
class AccessPlan:
    """How one thread's values are accessed: ``groups`` of value indices (lane order), each a vector of ``width``
    consecutive elements along the contiguous mode (``width == 1``: scalar accesses). ``coords`` as in
    ``tile_coordinates`` (None: decode the tile index at run time)."""

    coords: tuple | None
    groups: tuple
    width: int


@functools.lru_cache(maxsize=512)
def plan_access(tv, tile_shape, contiguous, max_width: int) -> AccessPlan:
    """Group a thread's values into vectors of the widest power-of-two width k ≤ ``max_width`` such that, for
    EVERY thread, each group is k values at consecutive coordinates of mode ``contiguous`` (equal in the other
    modes) and starts at a contiguous coordinate that is a multiple of k (so the vector is k·esize aligned once
    the origin is a multiple of k and the tensor is aligned). ``max_width`` already folds in the element size,
    the tensor's alignment and the origin's known divisibility."""
    nv = lc.size(tv[1])
    coords = tile_coordinates(tv, tile_shape)
    singles = AccessPlan(coords, tuple((v,) for v in range(nv)), 1)
    if coords is None or contiguous is None or max_width <= 1:
        return singles
    c = contiguous
    others = [m for m in range(len(coords)) if m != c]
    key = {v: (tuple(coords[m].values[v] for m in others), coords[c].values[v]) for v in range(nv)}
    at = {}
    for v, k in key.items():
        if k in at:  # two values at one element: keep them scalar
            return singles
        at[k] = v
    thread_c = layout_table(coords[c].thread)
    order = sorted(range(nv), key=lambda v: key[v])
    width = 1
    while width * 2 <= max_width:
        width *= 2
    while width > 1:
        if not np.any(thread_c % width):
            groups, used, ok = [], set(), True
            for v in order:
                if v in used:
                    continue
                rest, col = key[v]
                if col % width:
                    ok = False
                    break
                lanes = [at.get((rest, col + j)) for j in range(width)]
                if any(x is None or x in used for x in lanes):
                    ok = False
                    break
                used.update(lanes)
                groups.append(tuple(lanes))
            if ok:
                return AccessPlan(coords, tuple(groups), width)
        width //= 2
    return singles


@dataclass(frozen=True)
class SmemAccessPlan:
    """How a thread's values of a smem.load/store are addressed: element offset (before the layout's ``offset`` and
    swizzle) ``thread(t) + values[v]`` (``thread`` a layout, None: decode at run time), and ``groups`` of ``width``
    value indices at consecutive addresses (one vector access each; ``width == 1``: scalars)."""

    thread: object
    values: tuple
    groups: tuple
    width: int


@functools.lru_cache(maxsize=512)
def plan_smem_access(tv, inner, esize: int, chunk_bytes: int, base_align: int) -> SmemAccessPlan:
    """The plan for view layout ``inner`` (element offsets over the view's shape) and TV layout ``tv``:
    ``G = composition(inner, tv)`` checked against the tables (``inner(tv(t, v)) == G0(t) + G1(v)`` for all t, v).
    The vector width k is the largest power of two with k·esize ≤ min(16, ``chunk_bytes`` (the aligned block a
    swizzle keeps contiguous), ``base_align``) such that every G0(t) is a multiple of k and the values' G1
    partition into runs of k consecutive offsets starting at multiples of k.

    Example: ``inner = (64,32):(32,1)``, ``tv = (128,16):(16,1)``, f32, chunk 16, base 1024 → G0 = (128):(16),
    values 0..15, width 4, groups ((0,1,2,3), ..., (12,13,14,15)).
    """
    nt, nv = lc.size(tv[0]), lc.size(tv[1])
    index = layout_table(tv[0])[:, None] + layout_table(tv[1])[None, :]
    want = layout_table(inner)[index]
    singles = tuple((v,) for v in range(nv))
    try:
        g = lc.composition(inner, tv)
        ok = lc.rank(g) == 2 and lc.size(g[0]) == nt and lc.size(g[1]) == nv
    except lc.LayoutError:
        ok = False
    if ok:
        gt, gv = layout_table(g[0]), layout_table(g[1])
        ok = bool(np.array_equal(gt[:, None] + gv[None, :], want))
    if not ok:
        return SmemAccessPlan(None, tuple(int(x) for x in want[0]), singles, 1)
    values = tuple(int(x) for x in gv)
    limit = min(16, chunk_bytes, base_align) // esize
    width = 1
    while width * 2 <= limit:
        width *= 2
    at = {}
    for v, o in enumerate(values):
        if o in at:  # two values at one element: keep them scalar
            return SmemAccessPlan(g[0], values, singles, 1)
        at[o] = v
    while width > 1:
        if not np.any(gt % width):
            groups, used, good = [], set(), True
            for o in sorted(at):
                v = at[o]
                if v in used:
                    continue
                lanes = [at.get(o + j) for j in range(width)]
                if o % width or any(x is None for x in lanes):
                    good = False
                    break
                used.update(lanes)
                groups.append(tuple(lanes))
            if good:
                return SmemAccessPlan(g[0], values, tuple(groups), width)
        width //= 2
    return SmemAccessPlan(g[0], values, singles, 1)
