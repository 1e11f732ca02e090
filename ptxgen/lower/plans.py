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
from layoutc.hopper import vector_groups

from ..ir.layout_table import layout_values, tv_index, tv_parts  # noqa: F401  (the lowering's tables)
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
    """``[layout(i) for i in range(size(layout))]`` as an int64 array (``layout_values``), or a ThreadMap's value per
    thread. ``(4,2):(2,1)`` → ``[0 2 4 6 1 3 5 7]``. Post: ``layout_table(L)[i] == L(i)``."""
    if isinstance(layout, ThreadMap):
        return layout.table()
    return layout_values(layout)


@dataclass(frozen=True)
class ThreadMap:
    """The thread part of a swizzled TV map (``Sw o offset o TV``), which no layout expresses:
    ``t ↦ then(swizzle(offset + first(t)))`` (``then`` None: the tile index itself). The lowering emits it at run
    time (``LoweringContext.emit_layout``); ``layout_table`` tabulates it.
    ``ThreadMap((8,32):(512,1), 0, Sw<3,3,-6>, (64,64):(1,0))``: the row of thread t's first value."""

    first: object
    offset: int
    swizzle: object
    then: object = None

    def table(self) -> np.ndarray:
        """The map's value per thread: ``then(swizzle(offset + first(t)))`` for t < size(first), as int64.
        ``ThreadMap(4:2, 0, Sw<1,1,1>)`` → ``[0, 2, 6, 4]``. Post: shape ``(size(first),)``."""
        index = self.swizzle(self.offset + layout_table(self.first))
        return index if self.then is None else layout_table(self.then)[index]


def split_by_thread(table: np.ndarray, tv, then=None):
    """``table[t, v] == thread(t) + values[v]`` for every thread and value of the swizzled map ``tv``, with
    ``thread`` the ThreadMap of the value-0 column (``then`` applied): (ThreadMap, values) or None when the table
    does not split so (the swizzle mixes value bits with thread bits; then the lowering computes every value's
    index at run time). Example: a transpose's smem read ``Sw<3,3,6> o 0 o TV`` whose swizzle XORs only bits
    the thread picks splits; one XORing a value bit into a thread bit does not."""
    sw, offset, inner = tv_parts(tv)
    values = table[0] - table[0, 0]
    if not np.array_equal(table, table[:, :1] + values[None, :]):
        return None
    thread = ThreadMap(inner[0], offset + int(inner[1](0)), sw, then)
    return thread, tuple(int(x) for x in values)


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
    disagrees with the tables (then the lowering decodes coordinates from the tile index at run time). A swizzled
    map's thread part is a ``ThreadMap`` (``split_by_thread``): e.g. ``Sw<3,3,-6> o 0 o TV`` over (64, 64) gives each
    row the thread's swizzled row and each value a constant column offset."""
    nt, nv = lc.size(tv[0]), lc.size(tv[1])
    index = tv_index(tv)
    sizes = mode_sizes(tile_shape)
    out = []
    prefix = 1
    for m, s in enumerate(sizes):
        want = (index // prefix) % s
        prefix *= s
        if isinstance(tv, lc.ComposedLayout):   # a swizzled map: split its table (no layout composes with it)
            split = split_by_thread(want, tv, coordinate_layout(tile_shape, m))
            if split is None:
                return None
            out.append(ModeCoords(*split))
            continue
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
    ``tile_coordinates`` (None: decode the tile index at run time, of each group's first value)."""

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
    if contiguous is None or max_width <= 1:
        return singles
    if coords is None:
        if isinstance(tv, lc.ComposedLayout):   # a swizzled map that does not split: vectors from its table
            width, groups = _table_vectors(tv, tile_shape, contiguous, max_width)
            return AccessPlan(None, groups, width)
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


def _table_vectors(tv, tile_shape, contiguous: int, max_width: int) -> tuple:
    """(width, groups) of a TV map whose coordinates are computed per access at run time: ``vector_groups`` of each
    value's position along the contiguous mode, the other modes' coordinates spaced a row of ``max_width``-rounded
    length apart (so a run of k never crosses into another row). ``Sw<2,3,-4> o 0 o ((4,8),(4,4)):((128,1),(32,8))``
    over (32, 16), contiguous mode 1: (4, four groups of 4 columns)."""
    index = tv_index(tv)
    sizes = mode_sizes(tile_shape)
    coords, prefix = [], 1
    for s in sizes:
        coords.append((index // prefix) % s)
        prefix *= s
    row = -(-sizes[contiguous] // max_width) * max_width
    offset = coords[contiguous].copy()
    scale = row
    for m, s in enumerate(sizes):
        if m != contiguous:
            offset += scale * coords[m]
            scale *= s
    return vector_groups(offset.tolist(), max_width)


@dataclass(frozen=True)
class SmemAccessPlan:
    """How a thread's values of a smem.load/store are addressed: element offset (before the layout's ``offset`` and
    swizzle) ``thread(t) + values[v]`` (``thread`` a layout or a ``ThreadMap``; None: each group's first value is
    decoded at run time, ``values`` then being thread 0's offsets), and ``groups`` of ``width`` value indices at
    consecutive addresses in every thread (one vector access each; ``width == 1``: scalars)."""

    thread: object
    values: tuple
    groups: tuple
    width: int


@functools.lru_cache(maxsize=512)
def plan_smem_access(tv, inner, esize: int, chunk_bytes: int, base_align: int) -> SmemAccessPlan:
    """The plan for view layout ``inner`` (element offsets over the view's shape) and TV map ``tv`` (a layout, or a
    swizzled one: ``Sw o offset o TV``): ``G = composition(inner, tv)`` checked against the tables
    (``inner(tv(t, v)) == G0(t) + G1(v)`` for all t, v); for a swizzled map the table itself split into a
    ``ThreadMap`` plus a constant per value (``split_by_thread``). The vectors are
    ``layoutc.hopper.vector_groups`` of the table — the one rule the bank-conflict analysis uses too — at most
    min(16, ``chunk_bytes`` (the aligned block a swizzle keeps contiguous), ``base_align``) bytes.

    Example: ``inner = (64,32):(32,1)``, ``tv = (128,16):(16,1)``, f32, chunk 16, base 1024 → G0 = (128):(16),
    values 0..15, width 4, groups ((0,1,2,3), ..., (12,13,14,15)).
    """
    nt, nv = lc.size(tv[0]), lc.size(tv[1])
    want = layout_table(inner)[tv_index(tv)]
    limit = max(1, min(16, chunk_bytes, base_align) // esize)
    width, groups = vector_groups(want.tolist(), limit)
    # without a split, each group's first address is computed at run time (the groups hold in every thread)
    unsplit = SmemAccessPlan(None, tuple(int(x) for x in want[0]), groups, width)
    if isinstance(tv, lc.ComposedLayout):
        split = split_by_thread(want, tv, inner)
        if split is None:
            return unsplit
        thread, values = split
    else:
        try:
            g = lc.composition(inner, tv)
            ok = lc.rank(g) == 2 and lc.size(g[0]) == nt and lc.size(g[1]) == nv
        except lc.LayoutError:
            ok = False
        if ok:
            gt, gv = layout_table(g[0]), layout_table(g[1])
            ok = bool(np.array_equal(gt[:, None] + gv[None, :], want))
        if not ok:
            return unsplit
        thread, values = g[0], tuple(int(x) for x in gv)
    return SmemAccessPlan(thread, values, groups, width)
