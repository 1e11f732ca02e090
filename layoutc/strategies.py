"""Hypothesis strategies for layoutc: shapes, layouts, tilers and swizzles with known algebraic properties.

Use them in your own property tests::

    from hypothesis import given
    import layoutc as lc
    from layoutc.strategies import composable_pairs, layout_values

    @given(composable_pairs())
    def test_composition_is_function_composition(pair):
        a, b = pair
        ab = lc.composition(a, b)
        av = layout_values(a, max(layout_values(b)) + 1)
        assert layout_values(ab) == [av[x] for x in layout_values(b)]

Every strategy is keyword-configurable and has small defaults (sizes up to 2**10, depth <= 3, rank <= 4), so
that evaluating a drawn layout on its whole domain stays cheap. Each docstring says what a drawn value
*guarantees*; the guarantees are what CuTe's algebra needs for the corresponding law to hold exactly.

Besides the strategies this module exports small helpers: :func:`divisors`, :func:`factorizations`,
:func:`layout_values` (the 1-D function of a layout, computed independently of ``Layout.__call__``),
:func:`image` and :func:`span`.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from .int_tuple import is_tuple, leaves
from .layout import (
    Layout, LayoutLeft, LayoutRight, _, coalesce, filter as filter_layout, layout_values, make_layout,
    make_ordered_layout, modes,
)
from .swizzle import ComposedLayout, Swizzle

__all__ = [
    "divisors", "factorizations", "layout_values", "image", "span",
    "factorization", "regroup", "shapes", "layouts", "compact_layouts", "injective_layouts", "composable_pairs",
    "refined_layouts", "tilers_for", "swizzles", "composed_layouts",
]


# ---------------------------------------------------------------------------------------------------------------
# plain helpers


def divisors(n: int) -> list:
    """The positive divisors of ``n`` in increasing order.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]

    Pre: n >= 1.
    """
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i != n // i:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def factorizations(n: int, min_factor: int = 2) -> list:
    """Every ordered factorization of ``n`` into factors >= ``min_factor`` (>= 2), as tuples.

    >>> factorizations(8)
    [(2, 2, 2), (2, 4), (4, 2), (8,)]
    >>> factorizations(1)
    [()]

    Post: each tuple's product is ``n``; the empty tuple stands for ``n == 1``. The count grows quickly
    (512 for 2**10); use the :func:`factorization` strategy to draw one.
    """
    if n == 1:
        return [()]
    out = []
    for d in divisors(n):
        if d >= max(min_factor, 2):
            out.extend((d,) + rest for rest in factorizations(n // d, min_factor))
    return out


def image(layout) -> set:
    """The set ``{L(i) : i < size(L)}``.

    >>> sorted(image(Layout((2, 3), (0, 4))))
    [0, 4, 8]
    """
    return set(layout_values(layout))


def span(layout) -> int:
    """The span of a complementable layout: ``d*s`` of its largest-stride mode after ``filter`` (1 for ``1:0``).

    For an injective layout built by :func:`injective_layouts` this is the smallest ``M`` such that
    ``make_layout(L, complement(L, M))`` is a bijection onto ``[0, M)``.

    >>> span(Layout((2, 4), (1, 6)))
    24
    >>> span(Layout(4, 0))
    1
    """
    f = filter_layout(layout)
    best = 1
    for s, d in zip(leaves(f.shape), leaves(f.stride)):
        if d != 0:
            best = max(best, s * abs(d))
    return best


def _unflatten(flat, tree):
    it = iter(flat)

    def build(t):
        if is_tuple(t):
            return tuple(build(e) for e in t)
        return next(it)

    return build(tree)


def _flat_shape(layout: Layout) -> list:
    """Flat shape of ``coalesce(layout)``, without the size-1 of ``1:0``."""
    c = coalesce(layout)
    return [s for s in leaves(c.shape) if s != 1]


# ---------------------------------------------------------------------------------------------------------------
# building blocks (plain ``_draw_*`` functions take hypothesis's ``draw``; strategies are cached because building
# a strategy object costs as much as drawing from it)

_INTS: dict = {}


def _ints(lo: int, hi: int):
    key = (lo, hi)
    strat = _INTS.get(key)
    if strat is None:
        strat = _INTS[key] = st.integers(lo, hi)
    return strat


def _pick(draw, seq):
    """An element of ``seq``; shrinks towards the first one."""
    return seq[draw(_ints(0, len(seq) - 1))] if len(seq) > 1 else seq[0]


def _draw_permutation(draw, items) -> list:
    """A random permutation (Fisher-Yates); shrinks towards the identity."""
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = i - draw(_ints(0, i))
        out[i], out[j] = out[j], out[i]
    return out


def _draw_factorization(draw, n: int, max_factors: int = 8) -> tuple:
    out = []
    rest = n
    while rest > 1:
        if len(out) == max_factors - 1 or draw(_ints(0, 2)) == 0:
            out.append(rest)
            break
        d = _pick(draw, divisors(rest)[1:])
        out.append(d)
        rest //= d
    return tuple(out)


def _draw_cuts(draw, n: int, max_parts: int, min_parts: int = 1) -> list:
    """Boundaries ``[0, ..., n]`` splitting ``n`` items into between min_parts and max_parts consecutive chunks."""
    bounds = [0]
    for pos in range(1, n):
        parts = len(bounds)  # chunks started so far
        if parts >= max_parts:
            break
        if min_parts - parts >= n - pos or draw(_ints(0, 1)) == 0:
            bounds.append(pos)
    bounds.append(n)
    return bounds


def _draw_tree(draw, n: int, max_depth: int, max_rank: int, allow_integral: bool):
    """A tree (nested tuples) of the indices 0..n-1 in order; rank-1 wrappers such as ``((a,b))`` are rare."""
    if n == 1 and allow_integral and draw(_ints(0, 2)) != 0:
        return 0

    def group(lo, hi, depth):
        n_items = hi - lo
        if depth >= max_depth or n_items == 1:
            return tuple(range(lo, hi))
        capacity = max_rank ** (max_depth - depth)
        k_min = max(1, -(-n_items // capacity))
        bounds = _draw_cuts(draw, n_items, max_parts=max(k_min, min(max_rank, n_items)), min_parts=k_min)
        if len(bounds) == 2:  # one chunk: this level stays flat, or (rarely) wraps a nested group
            if draw(_ints(0, 7)) != 0:
                return tuple(range(lo, hi))
            return (group(lo, hi, depth + 1),)
        out = []
        for a, b in zip(bounds, bounds[1:]):
            if b - a == 1 and (depth + 1 >= max_depth or draw(_ints(0, 7)) != 0):
                out.append(lo + a)
            else:
                out.append(group(lo + a, lo + b, depth + 1))
        return tuple(out)

    return group(0, n, 1)


@st.composite
def factorization(draw, n: int, max_factors: int = 8):
    """Draw one ordered factorization of ``n`` into factors >= 2 (``()`` for ``n == 1``).

    Example: ``factorization(12)`` may give ``(12,)``, ``(2, 6)``, ``(3, 2, 2)``, ...

    Post: ``math.prod(result) == n``; at most ``max_factors`` factors (the last one absorbs the rest).
    """
    return _draw_factorization(draw, n, max_factors)


@st.composite
def regroup(draw, items, max_depth: int = 3, max_rank: int = 4, allow_integral: bool = True):
    """Draw a random nesting of the flat sequence ``items`` (its order is kept).

    Example: ``regroup([2, 3, 4])`` may give ``(2, 3, 4)``, ``((2, 3), 4)``, ``(2, ((3, 4),))``; for one item it
    may give the bare item (an integral shape) or ``(item,)``.

    Post: ``leaves(result) == list(items)``; depth <= ``max_depth``; every tuple has rank <= ``max_rank`` when
    ``len(items) <= max_rank ** max_depth``; a bare item only for a single item and ``allow_integral``.
    """
    items = list(items)
    if not items:
        raise ValueError("regroup needs at least one item")
    tree = _draw_tree(draw, len(items), max_depth, max_rank, allow_integral)
    return _unflatten(items, tree)


def _nested(draw, flat_pairs, max_depth, max_rank, allow_integral=True):
    """Turn a list of (shape, stride) leaves into a Layout with a random nesting."""
    tree = _draw_tree(draw, len(flat_pairs), max_depth, max_rank, allow_integral)
    shp = _unflatten([p[0] for p in flat_pairs], tree)
    strd = _unflatten([p[1] for p in flat_pairs], tree)
    return Layout(shp, strd)


def _draw_leaf_sizes(draw, n_leaves, max_size, allow_unit_modes, min_leaf=2):
    budget = max_size
    out = []
    for k in range(n_leaves):
        remaining = n_leaves - k - 1
        hi = budget // (min_leaf ** remaining) if remaining else budget
        hi = min(hi, 64)
        if hi < min_leaf:
            out.append(1)
            continue
        # 0 means a 1-leaf (when allowed); small values are likelier than large ones
        v = draw(_ints(0 if allow_unit_modes else 1, 9))
        if v == 0:
            out.append(1)
            continue
        v = draw(_ints(min_leaf, min(hi, 8))) if v <= 6 else draw(_ints(min_leaf, hi))
        out.append(v)
        budget //= v
    return out


def _max_leaves(max_depth, max_rank, max_size, max_leaves):
    cap = max(1, int(math.log2(max(2, max_size))))
    return max(1, min(max_leaves, max_rank ** max(1, max_depth), cap))


def _draw_shape(draw, max_depth, max_rank, max_size, allow_unit_modes, max_leaves=8):
    n = draw(_ints(1, _max_leaves(max_depth, max_rank, max_size, max_leaves)))
    sizes = _draw_leaf_sizes(draw, n, max_size, allow_unit_modes)
    if not allow_unit_modes and 1 in sizes:
        sizes = [x for x in sizes if x != 1] or [2]
    tree = _draw_tree(draw, len(sizes), max_depth, max_rank, True)
    return _unflatten(sizes, tree)


# ---------------------------------------------------------------------------------------------------------------
# shapes and layouts


@st.composite
def shapes(draw, max_depth: int = 3, max_rank: int = 4, max_size: int = 1024, allow_unit_modes: bool = True,
           max_leaves: int = 8):
    """Nested positive int tuples (and plain ints), sometimes with 1-leaves.

    Example draws: ``6``, ``(4, 2)``, ``(2, (3, 1), 5)``, ``((8,),)``.

    Post: every leaf >= 1; ``product(shape) <= max_size``; depth <= ``max_depth``; at most ``max_leaves`` leaves;
    every tuple has rank <= ``max_rank``; 1-leaves only when ``allow_unit_modes``.
    """
    return _draw_shape(draw, max_depth, max_rank, max_size, allow_unit_modes, max_leaves)


_GAPS = (1, 1, 1, 2, 3)


def _draw_layout(draw, max_depth, max_rank, max_size, allow_zero_strides, allow_negative_strides, allow_unit_modes,
                 max_stride):
    shp = _draw_shape(draw, max_depth, max_rank, max_size, allow_unit_modes)
    flat = leaves(shp)
    style = draw(_ints(0, 2))
    if style == 0:  # compact order with small gaps: usually injective
        order = _draw_permutation(draw, range(len(flat)))
        strides = [0] * len(flat)
        cur = 1
        for i in order:
            cur *= _pick(draw, _GAPS)
            strides[i] = cur
            cur *= flat[i]
    else:
        big = max(1, max_stride)
        strides = [draw(_ints(1, min(8, big))) if draw(_ints(0, 2)) else draw(_ints(1, big)) for _s in flat]
    out = []
    for d in strides:
        if allow_zero_strides and draw(_ints(0, 5)) == 0:
            d = 0
        if allow_negative_strides and draw(_ints(0, 3)) == 0:
            d = -d
        out.append(d)
    return Layout(shp, _unflatten(out, shp))


@st.composite
def layouts(draw, max_depth: int = 3, max_rank: int = 4, max_size: int = 1024, allow_zero_strides: bool = True,
            allow_negative_strides: bool = False, allow_unit_modes: bool = True, max_stride: int = 64):
    """Arbitrary layouts ``shape:stride`` (not necessarily injective or compact).

    Example draws: ``8:1``, ``(4,2):(0,3)``, ``(2,(3,1)):(5,(1,7))``, ``(4,(2,2)):(1,(4,8))``.

    Strides are a mix of compact-with-gaps (often injective) and random values in ``[1, max_stride]``, 0 when
    ``allow_zero_strides`` and negated when ``allow_negative_strides``.
    Post: a valid Layout with ``size <= max_size``, depth <= ``max_depth`` and tuple ranks <= ``max_rank``; strides
    >= 0 unless ``allow_negative_strides``; no stride 0 unless ``allow_zero_strides``; no 1-leaf unless
    ``allow_unit_modes``.
    """
    return _draw_layout(draw, max_depth, max_rank, max_size, allow_zero_strides, allow_negative_strides,
                        allow_unit_modes, max_stride)


@st.composite
def compact_layouts(draw, max_depth: int = 3, max_rank: int = 4, max_size: int = 1024, allow_unit_modes: bool = True):
    """Compact layouts: a shape with column-major, row-major or a random ordered compact stride.

    Example draws: ``(4,2):(1,4)`` (LayoutLeft), ``(4,2):(2,1)`` (LayoutRight), ``(2,(3,4)):(12,(1,3))`` (ordered).

    Post: ``L`` is a bijection from ``[0, size)`` onto ``[0, size)``; 1-leaves have stride 0 (CuTe's compact
    rule); ``cosize(L) == size(L)``.
    """
    shp = _draw_shape(draw, max_depth, max_rank, max_size, allow_unit_modes)
    kind = draw(_ints(0, 2))
    if kind == 0:
        return make_layout(shp, LayoutLeft)
    if kind == 1:
        return make_layout(shp, LayoutRight)
    perm = _draw_permutation(draw, range(len(leaves(shp))))
    return make_ordered_layout(shp, _unflatten(perm, shp))


def _draw_injective(draw, max_depth, max_rank, max_size, max_gap, max_cosize, allow_unit_modes):
    flat = leaves(_draw_shape(draw, 1, 8, max_size, False))
    strides = []
    cur = 1
    budget = max(1, max_cosize // math.prod(flat))
    for x in flat:
        g = draw(_ints(1, max_gap)) if draw(_ints(0, 2)) == 0 else 1
        if g > budget:
            g = 1
        budget //= g
        cur *= g
        strides.append(cur)
        cur *= x
    pairs = list(zip(flat, strides))
    if allow_unit_modes and draw(_ints(0, 3)) == 0:
        for _k in range(draw(_ints(1, 2))):
            pairs.insert(draw(_ints(0, len(pairs))), (1, draw(_ints(0, 16))))
    pairs = _draw_permutation(draw, pairs)
    return _nested(draw, pairs, max_depth, max_rank)


@st.composite
def injective_layouts(draw, max_depth: int = 3, max_rank: int = 4, max_size: int = 1024, max_gap: int = 4,
                      max_cosize: int = 1 << 14, allow_unit_modes: bool = True):
    """Injective, *complementable* layouts with nonnegative strides.

    Built from a flat shape ``s_0..s_{n-1}`` (no 1s), gap factors ``g_i`` (``d_0 = g_0``,
    ``d_i = g_i * d_{i-1} * s_{i-1}``), a random permutation of the modes and a random regrouping (nesting).
    1-leaves (when allowed) are inserted with an arbitrary stride; they do not matter for injectivity.

    Example draws: ``4:2``, ``(2,4):(1,6)``, ``((3,2),1):((8,1),5)``.

    Post: ``size >= 2``; sorted by stride, every stride of a non-1 leaf is a multiple of ``d*s`` of the previous one,
    so ``complement`` and ``left_inverse`` never raise and ``L`` is injective on ``[0, size)``;
    ``span(L) <= max(max_cosize, size)`` (gaps are dropped when they would exceed it).
    """
    return _draw_injective(draw, max_depth, max_rank, max_size, max_gap, max_cosize, allow_unit_modes)


def _draw_refined(draw, flat_shape, max_depth=2, max_rank=4, full=False, allow_broadcast=True, allow_unit_modes=True,
                  extend=1, allow_permute=True):
    factors = []
    for x in flat_shape:
        factors.extend(_draw_factorization(draw, x))
    grid = [1]
    for f in factors:
        grid.append(grid[-1] * f)
    m = len(factors)
    bounds = _draw_cuts(draw, m, max_parts=m) if m else [0]
    runs = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    if not full:
        runs = [r for r in runs if draw(_ints(0, 4)) != 0]
    modes_ = []
    for a, b in runs:
        x = grid[b] // grid[a]
        if b == m and extend > 1:
            x *= draw(_ints(1, extend))
        modes_.append((x, grid[a]))
    if allow_broadcast:
        for _k in range(draw(_ints(0, 3)) // 2):
            modes_.append((draw(_ints(1, 4)), 0))
    if allow_unit_modes and draw(_ints(0, 4)) == 0:
        modes_.append((1, _pick(draw, grid)))
    if not modes_:
        modes_.append((1, _pick(draw, grid)) if allow_unit_modes or m == 0 else (grid[1], 1))
    if allow_permute:
        modes_ = _draw_permutation(draw, modes_)
    return _nested(draw, modes_, max_depth, max_rank)


@st.composite
def refined_layouts(draw, flat_shape, max_depth: int = 3, max_rank: int = 4, full: bool = False,
                    allow_broadcast: bool = True, allow_unit_modes: bool = True, extend: int = 1,
                    allow_permute: bool = True):
    """Layouts whose modes are runs of a refinement of ``flat_shape`` (a grid on which CuTe's algebra is exact).

    Each size in ``flat_shape`` is split into factors ``f_0..f_m``; factor ``j`` has the compact stride
    ``D_j = f_0*...*f_{j-1}``. Consecutive factors are grouped into runs, and a run ``[a, b)`` becomes the mode
    ``(f_a*...*f_{b-1}) : D_a``. Runs are kept (all of them when ``full``), permuted (when ``allow_permute``), mixed
    with stride-0 broadcast modes and 1-modes of a grid stride (when allowed), and nested at random. With
    ``extend > 1`` the run that ends at the last factor may be multiplied by up to ``extend`` (it then reaches
    past ``product(flat_shape)``).

    Example: ``refined_layouts([4, 3])`` may give ``(2,6):(1,2)``, ``(3,(2,2)):(4,(2,1))``, ``(2,4):(2,0)``.

    Post: at least one mode; with ``full`` and no broadcast/1-modes/extension, ``L`` is a bijection onto
    ``[0, product(flat_shape))`` whose strides lie on the grid (a *compact* layout refining ``flat_shape``);
    without broadcast modes, ``L`` is injective and complementable.
    """
    return _draw_refined(draw, flat_shape, max_depth, max_rank, full, allow_broadcast, allow_unit_modes, extend,
                         allow_permute)


@st.composite
def composable_pairs(draw, max_depth: int = 3, max_rank: int = 4, max_size: int = 1024, allow_broadcast: bool = True,
                     allow_extension: bool = True, allow_unit_modes: bool = True,
                     allow_negative_strides: bool = False, lhs=None):
    """Pairs ``(A, B)`` of Layouts for which CuTe's composition is exact: ``(A∘B)(i) == A(B(i))`` for i < size(B).

    ``B`` is drawn with :func:`refined_layouts` on the flat shape of ``coalesce(A)`` (composition works on A's
    coalesced form): its modes are runs of a refinement of that shape, permuted, with stride-0 broadcast modes,
    1-modes and nesting. ``B`` reaches past ``size(A)`` (along A's last mode, up to 3 times) only when A's last
    leaf is not 1 (then ``coalesce_x(A) == coalesce(A)``).

    Example: for ``A = (4,3):(1,5)`` B may be ``(2,3):(2,4)`` and ``A∘B = (2,3):(2,5)``.

    Post: ``composition(A, B)`` raises no LayoutError, the function law ``(A∘B)(i) == A(B(i))`` holds (A evaluated
    past its size along its last mode, as CuTe does), and ``compatible(shape(B), shape(A∘B))``. ``lhs`` may be a
    strategy for A (default :func:`layouts`).
    """
    if lhs is None:
        a = _draw_layout(draw, max_depth, max_rank, max_size, True, allow_negative_strides, allow_unit_modes, 64)
    else:
        a = draw(lhs)
    extend = 3 if allow_extension and leaves(a.shape)[-1] != 1 else 1
    b = _draw_refined(draw, _flat_shape(a), max_depth=max_depth, max_rank=max_rank, allow_broadcast=allow_broadcast,
                      allow_unit_modes=allow_unit_modes, extend=extend)
    return a, b


def _draw_mode_tiler(draw, mode: Layout, allow_underscore, allow_int, allow_layout, allow_nested, max_depth,
                     full=False):
    choices = []
    if allow_underscore:
        choices.append("_")
    if allow_int:
        choices.append("int")
    if allow_layout:
        choices.append("layout")
    if allow_nested and is_tuple(mode.shape):
        choices.append("nested")
    kind = _pick(draw, choices)
    if kind == "_":
        return _
    if kind == "nested":
        return _draw_tiler(draw, mode, allow_underscore, allow_int, allow_layout, allow_nested, False, max_depth,
                           full)
    flat = _flat_shape(mode)
    if kind == "int":
        # a prefix product of a refinement of the coalesced shape
        refined = []
        for x in flat:
            refined.extend(_draw_factorization(draw, x))
        return math.prod(refined[:draw(_ints(0, len(refined)))])
    if not flat:
        return Layout(1, 1) if draw(_ints(0, 1)) else 1
    return _draw_refined(draw, flat, max_depth=max_depth, allow_broadcast=False, allow_unit_modes=False)


def _draw_tiler(draw, layout, allow_underscore, allow_int, allow_layout, allow_nested, allow_single, max_depth,
                full=False):
    ms = modes(layout)
    if allow_single and (allow_int or allow_layout) and draw(_ints(0, 3)) == 0:
        return _draw_mode_tiler(draw, layout, False, allow_int, allow_layout, False, max_depth)
    k = len(ms) if full else draw(_ints(1, len(ms)))
    return tuple(_draw_mode_tiler(draw, ms[i], allow_underscore, allow_int, allow_layout, allow_nested, max_depth,
                                  full) for i in range(k))


@st.composite
def tilers_for(draw, layout, allow_underscore: bool = True, allow_int: bool = True, allow_layout: bool = True,
               allow_nested: bool = True, allow_single: bool = True, full: bool = False, max_depth: int = 3):
    """Tilers for ``layout`` whose every element divides its mode exactly (for logical_divide and friends).

    A drawn tiler is either a tuple ``(t_0, ..., t_{k-1})`` with ``1 <= k <= rank(layout)`` (by-mode), or, when
    ``allow_single``, sometimes a single Layout or int tiler for the whole layout. Each element, for the mode ``M``
    it tiles, is one of

    - ``_`` (when ``allow_underscore``);
    - an int ``N`` that is a prefix product of a refinement of ``coalesce(M)``'s flat shape (a divisor "on the
      grid", e.g. 1, 2, 4, 8 or 12 for ``M = (4,3):(1,5)``; when ``allow_int``);
    - a Layout from :func:`refined_layouts` on ``coalesce(M)``'s flat shape, without broadcast or 1-modes
      (injective and complementable, e.g. ``(3,2):(4,1)``; when ``allow_layout``);
    - a nested tuple tiler for a tuple mode (when ``allow_nested``).

    With ``full`` every tuple (at every level) has exactly the rank of the mode it tiles.

    Example: for ``(8,(4,6)):(1,(8,32))`` a draw may be ``(4, (2, 3))``, ``(_, 2:1)`` or ``(2:4,)``.

    Post: ``logical_divide(layout, tiler)`` raises no LayoutError, its tile mode equals ``layout ∘ tiler`` as a
    function, and (tile, rest) is a permutation of each divided mode's domain. Pass ``allow_underscore=False`` for
    zipped/tiled/flat divides (``_`` has no (tile, rest) pair there).
    Pre: at least one of ``allow_underscore``, ``allow_int``, ``allow_layout``.
    """
    return _draw_tiler(draw, layout, allow_underscore, allow_int, allow_layout, allow_nested, allow_single, max_depth,
                       full)


# ---------------------------------------------------------------------------------------------------------------
# swizzles


def _draw_swizzle(draw, max_bits, max_base, max_shift, allow_identity):
    b = draw(_ints(0 if allow_identity else 1, max_bits))
    m = draw(_ints(0, max_base))
    s = draw(_ints(max(b, 1 if b else 0), max(b, max_shift)))
    if s and draw(_ints(0, 1)):
        s = -s
    return Swizzle(b, m, s)


@st.composite
def swizzles(draw, max_bits: int = 3, max_base: int = 4, max_shift: int = 4, allow_identity: bool = True):
    """``Swizzle(B, M, S)`` with ``0 <= B <= max_bits``, ``0 <= M <= max_base`` and ``B <= |S| <= max_shift``, both
    signs of S.

    Example draws: ``Sw<3,4,3>``, ``Sw<2,0,-3>``, ``Sw<0,1,0>`` (an identity).

    Post: a valid Swizzle (CuTe's preconditions hold); ``bits >= 1`` unless ``allow_identity``.
    Pre: ``max_shift >= max_bits``.
    """
    return _draw_swizzle(draw, max_bits, max_base, max_shift, allow_identity)


@st.composite
def composed_layouts(draw, swizzle=None, inner=None, max_offset: int = 1 << 10):
    """``ComposedLayout(Sw, offset, L)``: a swizzle, an offset and a layout with nonnegative strides.

    Example draws: ``Sw<3,4,3> o 0 o (8,64):(64,1)``, ``Sw<1,2,-2> o 40 o (4,2):(2,0)``.

    Post: evaluates as ``Sw(offset + L(i))``; ``offset`` in ``[0, max_offset)`` (0 a third of the time).
    ``swizzle``/``inner`` may be strategies replacing the defaults (:func:`swizzles`, :func:`layouts`).
    """
    sw = draw(swizzle) if swizzle is not None else _draw_swizzle(draw, 3, 4, 4, True)
    lay = draw(inner) if inner is not None else _draw_layout(draw, 2, 4, 1024, True, False, True, 64)
    off = 0 if draw(_ints(0, 2)) == 0 else draw(_ints(0, max_offset - 1))
    return ComposedLayout(sw, off, lay)
