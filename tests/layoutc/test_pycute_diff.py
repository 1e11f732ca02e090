"""Differential tests: layoutc against pycute (the Python CuTe model shipped in the ``nvidia-cutlass`` wheel).

For every operation pycute has, hypothesis draws inputs and both results are compared *structurally* (shape and
stride trees). pycute is not CuTe C++: its known deviations are excluded from the comparison (and counted), and
each one is pinned below by a test that asserts layoutc's (CuTe's) answer exactly *and* pycute's different answer:

(a) composition with a tiler shorter than the layout's rank: CuTe drops the untouched modes, pycute keeps them.
(b) strides of size-1 modes: CuTe keeps them (``1:4 ∘ 1:2 = 1:8``), pycute writes 0, which can change the function
    (``1:2 ∘ 2:64`` is ``2:128`` in CuTe); composition also starts from ``coalesce_x(A)``, which keeps a trailing
    size-1 mode's stride. Inputs with shape-1 leaves are excluded; otherwise shape-1 leaves of the results get
    stride 0 on both sides before comparing.
(c) left_inverse uses a different algorithm (CuTe ``(2,3):(1,4)`` → ``(4,3):(1,2)``): no differential.
(d) pycute's logical_product sends an integer tiler to logical_divide: products use Layout tilers only.
(e) pycute skips CuTe's divisibility checks: where layoutc raises LayoutError the example is skipped (and counted);
    pycute then returns results of the wrong size (``(4,5):(1,10) ∘ 6:1`` gives ``4:1``).

Found by these tests (layoutc follows the reference sheet, CuTe C++ 4.x; pycute differs):

(f) composition's stride check: CuTe asks ``rd % c == 0 or rd < c``, pycute asserts ``c % rd == 0 or rd % c == 0``,
    so pycute rejects e.g. ``(4,5):(1,10) ∘ 2:3`` (CuTe: ``2:3``).
(g) right_inverse: CuTe skips a mode whose stride is not the running product and keeps scanning (and coalesces
    first, then uses its unstable exchange sort); pycute stops at the first mismatch (a stride-0 mode stops it at
    once) and breaks stride ties by shape. They agree on injective layouts without stride-0 modes.
(h) tiled_divide/tiled_product: CuTe's ``repeat<1>(_)`` keeps a rank-1 rest mode as one mode, pycute unwraps it
    (``tiled_divide(8:1, (4,))``: CuTe ``((4),(2)):((1),(4))``, pycute ``((4),2):((1),4)``).
(i) idx2crd past the end: CuTe's last mode takes the unbounded quotient, pycute wraps it modulo its size.
(j) make_layout(shape): CuTe gives shape-1 leaves stride 0 and does not advance the product, pycute uses a plain
    prefix product (``(2,1,3)``: CuTe ``(1,0,2)``, pycute ``(1,2,2)``).
(k) cosize with negative strides: CuTe sums ``(s-1)*|d|``; pycute uses ``L(size-1)+1``.
(l) logical_divide's complement cotarget: CuTe uses ``shape(coalesce(A))`` (a tuple folds with ceil_div), pycute
    ``size(A)``; they differ only for inexact tilers, e.g. ``logical_divide((3,5):(1,10), 2:1)``, and there
    pycute's own stride assert (f) then rejects the composition (a search of small cases found no input where
    both succeed with different results).
(m) slicing with a top-level ``_``: CuTe returns the layout itself, pycute wraps it into a rank-1 tuple.
(n) Swizzle with shift 0 (only legal with 0 bits, the identity): pycute's shiftr/shiftl recurse forever.
(o) an integer in a divide's tiler: CuTe makes it ``make_layout(n)``, so ``1`` is ``1:0``; pycute uses ``1:1``
    (``logical_divide(7:4, 1)``: CuTe ``(1,7):(0,4)``, pycute ``(1,7):(4,4)``). Excluded with the other size-1
    cases of (b); spec/layout-algebra.md §5(f).
"""
from collections import Counter, defaultdict

import pytest
from hypothesis import assume, given, note, strategies as st

import layoutc as lc
from layoutc import Layout, _
from layoutc.int_tuple import is_tuple, leaves
from layoutc.strategies import (
    composable_pairs, composed_layouts, injective_layouts, layout_values, layouts, shapes, swizzles, tilers_for,
)

pycute = pytest.importorskip("pycute")

STATS = defaultdict(Counter)


@pytest.fixture(scope="module", autouse=True)
def _publish_stats(request):
    yield
    request.config._layoutc_diff_stats = STATS


# ---------------------------------------------------------------------------------------------------------------
# conversion and comparison


def py(x):
    """layoutc Layout / tiler → pycute (``_`` → None)."""
    if x is _:
        return None
    if isinstance(x, Layout):
        return pycute.Layout(x.shape, x.stride)
    if isinstance(x, tuple):
        return tuple(py(e) for e in x)
    return x


def norm_unit_strides(shape, stride):
    if is_tuple(shape):
        return tuple(norm_unit_strides(s, d) for s, d in zip(shape, stride))
    return 0 if shape == 1 else stride


def structure(layout, normalize=False):
    if normalize:
        return layout.shape, norm_unit_strides(layout.shape, layout.stride)
    return layout.shape, layout.stride


def has_unit_leaf(*xs) -> bool:
    for x in xs:
        if isinstance(x, Layout):
            if 1 in leaves(x.shape):
                return True
        elif isinstance(x, tuple):
            if has_unit_leaf(*x):
                return True
        elif isinstance(x, int) and x == 1:
            return True
    return False


def run_lc(op, fn):
    """layoutc's result, or skip the example (deviation (e)) when layoutc raises its precondition error."""
    try:
        return fn()
    except lc.LayoutError:
        STATS[op]["layout_error"] += 1
        assume(False)


def run_py(op, fn):
    """pycute's result, or None when pycute asserts (counted; the caller decides whether that is a deviation)."""
    try:
        return fn()
    except (AssertionError, ZeroDivisionError, IndexError, TypeError):
        STATS[op]["pycute_error"] += 1
        return None


def compare(op, ours, theirs, normalize=False):
    STATS[op]["compared"] += 1
    note(f"layoutc {lc.to_str(ours)}  pycute {theirs}")
    assert structure(ours, normalize) == structure(theirs, normalize)


def excluded(op):
    STATS[op]["deviation"] += 1


small_layouts = layouts(max_size=256, max_depth=2, max_rank=3, allow_unit_modes=False)
nonneg_layouts = layouts(max_size=256)
signed_layouts = layouts(max_size=256, allow_negative_strides=True)
no_unit_layouts = layouts(max_size=256, allow_unit_modes=False)


# ---------------------------------------------------------------------------------------------------------------
# coalesce, filter


@given(signed_layouts)
def test_coalesce(L):
    compare("coalesce", lc.coalesce(L), pycute.coalesce(py(L)))


@st.composite
def layout_and_profile(draw):
    L = draw(signed_layouts)
    if not is_tuple(L.shape):
        return L, (1,)
    k = draw(st.integers(1, len(L.shape)))
    prof = tuple((1,) * len(s) if is_tuple(s) and draw(st.booleans()) else 1 for s in L.shape[:k])
    return L, prof


@given(layout_and_profile())
def test_coalesce_by_mode(case):
    L, prof = case
    compare("coalesce(profile)", lc.coalesce(L, prof), pycute.coalesce(py(L), prof))


@given(signed_layouts)
def test_filter(L):
    compare("filter", lc.filter(L), pycute.filter(py(L)))


@given(layout_and_profile())
def test_filter_by_mode(case):
    L, prof = case
    compare("filter(profile)", lc.filter(L, prof), pycute.filter(py(L), prof))


# ---------------------------------------------------------------------------------------------------------------
# composition


def pycute_stride_check_rejects(A, B) -> bool:
    """Deviation (f): pycute's assert ``c % rd == 0 or rd % c == 0`` on the coalesced lhs modes (but the last)
    fails where CuTe's ``rd % c == 0 or rd < c`` passes."""
    C = lc.coalesce(A)
    cs = leaves(C.shape)

    def walk(s, d):
        if is_tuple(s):
            return any(walk(x, y) for x, y in zip(s, d))
        if d == 0:
            return False
        rs, rd = s, d
        for c in cs[:-1]:
            if not (c % rd == 0 or rd % c == 0):
                return True
            ns = min(max(1, c // rd), rs)
            rs //= ns
            rd = -(-rd // c)
        return False

    return walk(B.shape, B.stride)


def diff_composition(op, A, B):
    if has_unit_leaf(A, B):
        excluded(op)  # (b)
        assume(False)
    ours = run_lc(op, lambda: lc.composition(A, B))
    theirs = run_py(op, lambda: pycute.composition(py(A), py(B)))
    if theirs is None:
        assert pycute_stride_check_rejects(A, Layout(B, 1) if isinstance(B, int) else B), "pycute failed otherwise"
        excluded(op)  # (f)
        return
    compare(op, ours, theirs, normalize=True)


@given(composable_pairs(max_size=256, allow_negative_strides=True, allow_unit_modes=False))
def test_composition_exact_pairs(pair):
    diff_composition("composition", *pair)


@given(small_layouts, layouts(max_size=64, max_depth=2, max_rank=2, max_stride=16, allow_unit_modes=False))
def test_composition_arbitrary_pairs(A, B):
    diff_composition("composition", A, B)


@given(st.data())
def test_composition_int_tiler(data):
    A = data.draw(small_layouts)
    if data.draw(st.booleans()):
        n = data.draw(st.integers(2, 64))  # arbitrary: often a LayoutError (skipped)
    else:  # on A's grid: never a LayoutError
        n = data.draw(tilers_for(A, allow_underscore=False, allow_layout=False, allow_nested=False))
        n = n[0] if isinstance(n, tuple) else n
        assume(n > 1)
    diff_composition("composition(int)", A, n)


def tiler_is_full(L, T) -> bool:
    """Whether every tuple in the tiler covers all modes of the mode it tiles (else deviation (a))."""
    if not isinstance(T, tuple):
        return True
    ms = lc.modes(L)
    return len(T) == len(ms) and all(tiler_is_full(m, t) for m, t in zip(ms, T))


@st.composite
def layout_and_full_tiler(draw, allow_underscore=True):
    """A layout and a by-mode tiler covering all of its modes (pycute keeps untouched modes: deviation (a))."""
    L = draw(no_unit_layouts)
    T = draw(tilers_for(L, allow_single=False, allow_underscore=allow_underscore, full=True))
    assert tiler_is_full(L, T)
    return L, T


@given(layout_and_full_tiler())
def test_composition_tuple_tiler(case):
    L, T = case
    if has_unit_leaf(L, T):
        excluded("composition(tuple)")
        assume(False)
    ours = run_lc("composition(tuple)", lambda: lc.composition(L, T))
    theirs = run_py("composition(tuple)", lambda: pycute.composition(py(L), py(T)))
    assert theirs is not None
    compare("composition(tuple)", ours, theirs, normalize=True)


# ---------------------------------------------------------------------------------------------------------------
# complement


@given(injective_layouts(max_size=256, max_cosize=1 << 12), st.integers(1, 1 << 13))
def test_complement_int_cotarget(L, T):
    ours = run_lc("complement", lambda: lc.complement(L, T))
    theirs = run_py("complement", lambda: pycute.complement(py(L), T))
    assert theirs is not None
    compare("complement", ours, theirs)


@given(nonneg_layouts, st.integers(1, 1 << 12))
def test_complement_arbitrary_layouts(L, T):
    ours = run_lc("complement(arbitrary)", lambda: lc.complement(L, T))
    theirs = run_py("complement(arbitrary)", lambda: pycute.complement(py(L), T))
    assert theirs is not None
    compare("complement(arbitrary)", ours, theirs)


@given(injective_layouts(max_size=256, max_cosize=1 << 12))
def test_complement_default_cotarget(L):
    ours = run_lc("complement()", lambda: lc.complement(L))
    theirs = run_py("complement()", lambda: pycute.complement(py(L)))
    assert theirs is not None
    compare("complement()", ours, theirs)


# ---------------------------------------------------------------------------------------------------------------
# right_inverse


def is_injective(L) -> bool:
    v = layout_values(L)
    return len(set(v)) == len(v)


@given(st.one_of(nonneg_layouts, injective_layouts(max_size=256)))
def test_right_inverse(L):
    ours = lc.right_inverse(L)
    theirs = pycute.right_inverse(py(L))
    if is_injective(L) and 0 not in [d for s, d in zip(leaves(L.shape), leaves(L.stride)) if s != 1]:
        compare("right_inverse", ours, theirs)
        return
    # (g): both must still be right inverses; CuTe's is never shorter on this domain
    excluded("right_inverse")
    lv = layout_values(L, lc.size(L))
    for R in (ours, Layout(theirs.shape, theirs.stride)):
        assert [lv[x] for x in layout_values(R)] == list(range(lc.size(R)))


# ---------------------------------------------------------------------------------------------------------------
# divides


def diff_divide(op, lc_fn, py_fn, L, T, normalize=True):
    if has_unit_leaf(L, T):
        excluded(op)  # (b)
        assume(False)
    ours = run_lc(op, lambda: lc_fn(L, T))
    theirs = run_py(op, lambda: py_fn(py(L), py(T)))
    assert theirs is not None, "pycute failed on an input layoutc accepts"
    compare(op, ours, theirs, normalize)
    return ours, theirs


@given(st.data())
def test_logical_divide_exact_tilers(data):
    L = data.draw(no_unit_layouts)
    T = data.draw(tilers_for(L))
    diff_divide("logical_divide", lc.logical_divide, pycute.logical_divide, L, T)


def cotarget_fold_differs(L, T) -> bool:
    """Deviation (l): CuTe's complement cotarget is shape(coalesce(L)) (ceil_div folds over a tuple), pycute's is
    size(L). True where the two complements of a Layout/int tiler differ."""
    tile = Layout(T, 1) if isinstance(T, int) else T
    if not isinstance(tile, Layout):
        return False
    c_shape = lc.coalesce(L).shape
    try:
        return lc.complement(tile, c_shape) != lc.complement(tile, lc.size(L))
    except lc.LayoutError:
        return False


@given(small_layouts, st.one_of(st.integers(1, 32), layouts(max_size=32, max_depth=1, max_rank=2,
                                                             allow_zero_strides=False, max_stride=8)))
def test_logical_divide_arbitrary_tilers(L, T):
    op = "logical_divide(arbitrary)"
    if has_unit_leaf(L, T):
        excluded(op)  # (b)
        assume(False)
    ours = run_lc(op, lambda: lc.logical_divide(L, T))
    theirs = run_py(op, lambda: pycute.logical_divide(py(L), py(T)))
    tile = Layout(T, 1) if isinstance(T, int) else T
    if theirs is None:
        # (f), possibly after (l): pycute asserts on A ∘ (tile, its complement in size(A))
        rest = pycute.complement(py(tile), lc.size(L))
        assert pycute_stride_check_rejects(L, lc.make_layout(tile, Layout(rest.shape, rest.stride)))
        excluded(op)
        return
    if structure(ours, True) != structure(theirs, True) and cotarget_fold_differs(L, T):
        excluded(op)  # (l)
        return
    compare(op, ours, theirs, normalize=True)


def rank1_rest(z) -> bool:
    """Deviation (h): the rest mode of a zipped result is a rank-1 tuple."""
    return is_tuple(z[1].shape) and len(z[1].shape) == 1


@given(st.data())
def test_zipped_and_tiled_divide(data):
    L = data.draw(no_unit_layouts)
    T = data.draw(tilers_for(L, allow_underscore=False))
    z, _zp = diff_divide("zipped_divide", lc.zipped_divide, pycute.zipped_divide, L, T)
    if rank1_rest(z):
        excluded("tiled_divide")  # (h)
        return
    diff_divide("tiled_divide", lc.tiled_divide, pycute.tiled_divide, L, T)


# ---------------------------------------------------------------------------------------------------------------
# products (Layout tilers only: deviation (d))


@st.composite
def block_and_layout_tiler(draw):
    A = draw(layouts(max_size=64, max_depth=2, max_rank=3, allow_unit_modes=False))
    B = draw(layouts(max_size=16, max_depth=2, max_rank=3, max_stride=8, allow_unit_modes=False))
    return A, B


@st.composite
def block_and_tuple_tiler(draw):
    A = draw(layouts(max_size=64, max_depth=2, max_rank=3, allow_unit_modes=False))
    k = len(A.shape) if is_tuple(A.shape) else 1
    T = tuple(draw(layouts(max_size=8, max_depth=1, max_rank=2, max_stride=4, allow_unit_modes=False))
              for _i in range(k))
    return A, T


def diff_product(op, lc_fn, py_fn, A, B):
    if has_unit_leaf(A, B):
        excluded(op)  # (b)
        assume(False)
    ours = run_lc(op, lambda: lc_fn(A, B))
    theirs = run_py(op, lambda: py_fn(py(A), py(B)))
    if theirs is None:
        assert pycute_product_rejects(A, B), "pycute failed otherwise"
        excluded(op)  # (f) inside the composition with the complement
        return ours, None
    compare(op, ours, theirs, normalize=True)
    return ours, theirs


def pycute_product_rejects(A, B) -> bool:
    """(f) in pycute's logical_product: its stride assert fails in complement(A, size(A)*cosize(B)) ∘ B."""
    if isinstance(B, tuple):
        return any(pycute_product_rejects(m, b) for m, b in zip(lc.modes(A), B))
    c = pycute.complement(py(A), lc.size(A) * lc.cosize(B))
    return pycute_stride_check_rejects(Layout(c.shape, c.stride), B)


@given(block_and_layout_tiler())
def test_logical_product(case):
    diff_product("logical_product", lc.logical_product, pycute.logical_product, *case)


@given(block_and_tuple_tiler())
def test_logical_product_tuple_tiler(case):
    diff_product("logical_product(tuple)", lc.logical_product, pycute.logical_product, *case)


@given(st.one_of(block_and_layout_tiler(), block_and_tuple_tiler()))
def test_zipped_and_tiled_product(case):
    z, _zp = diff_product("zipped_product", lc.zipped_product, pycute.zipped_product, *case)
    if rank1_rest(z):
        excluded("tiled_product")  # (h)
        return
    diff_product("tiled_product", lc.tiled_product, pycute.tiled_product, *case)


# ---------------------------------------------------------------------------------------------------------------
# coordinates, size, cosize, slicing, default strides


@given(st.data())
def test_crd2idx_idx2crd_size_cosize(data):
    L = data.draw(signed_layouts)
    n = lc.size(L)
    STATS["size/cosize"]["compared"] += 1
    assert lc.size(L) == pycute.size(py(L))
    if all(d >= 0 for d in leaves(L.stride)):
        assert lc.cosize(L) == pycute.cosize(py(L))
    else:
        excluded("size/cosize")  # (k)
    for i in data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8)):
        c = lc.idx2crd(i, L.shape)
        assert c == pycute.idx2crd(i, L.shape)
        assert lc.crd2idx(c, L.shape, L.stride) == pycute.crd2idx(c, L.shape, L.stride)
        assert lc.crd2idx(i, L.shape, L.stride) == pycute.crd2idx(i, L.shape, L.stride)
        assert lc.crd2idx(c, L.shape) == pycute.crd2idx(c, L.shape) == i
        STATS["crd2idx/idx2crd"]["compared"] += 1


@st.composite
def slice_coords(draw, shape):
    """A coordinate congruent to a tuple ``shape`` (ints and nested tuples) with at least one ``_``."""
    def gen(s):
        r = draw(st.integers(0, 2))
        if r == 0:
            return _
        if r == 1 or not is_tuple(s):
            return draw(st.integers(0, lc.product(s) - 1))
        return tuple(gen(e) for e in s)

    c = tuple(gen(s) for s in shape)
    assume(_has_underscore(c))
    return c


def _has_underscore(c):
    return c is _ or (is_tuple(c) and any(_has_underscore(e) for e in c))


@given(st.one_of(shapes(), st.lists(st.integers(1, 64), min_size=1, max_size=4).map(tuple)),
       st.one_of(st.integers(1, 64), st.lists(st.integers(1, 16), min_size=1, max_size=4).map(tuple)))
def test_shape_div(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) != len(b):
        b = (b + (1,) * len(a))[:len(a)]
    ours = run_lc("shape_div", lambda: lc.shape_div(a, b))
    theirs = pycute.shape_div(a, b)
    STATS["shape_div"]["compared"] += 1
    assert ours == theirs


@given(st.data())
def test_slice(data):
    L = data.draw(signed_layouts)
    if not is_tuple(L.shape):
        excluded("slice")  # (m): only a top-level _ slices an integral layout
        return
    c = data.draw(slice_coords(L.shape))
    sub, off = pycute.slice_and_offset(py(c), py(L))
    compare("slice", L(c), sub)
    assert lc.slice_offset(c, L) == off


@given(shapes(allow_unit_modes=False))
def test_make_layout_default_strides(shp):
    compare("make_layout(shape)", Layout(shp), pycute.Layout(shp))


# ---------------------------------------------------------------------------------------------------------------
# swizzles and composed layouts


@given(swizzles(max_bits=4, max_base=5, max_shift=6), st.lists(st.integers(0, 1 << 20), min_size=1, max_size=64))
def test_swizzle_function(sw, xs):
    if sw.shift == 0:
        excluded("Swizzle")  # (n): pycute's shiftr/shiftl recurse forever on a 0 shift
        return
    ps = pycute.Swizzle(sw.bits, sw.base, sw.shift)
    STATS["Swizzle"]["compared"] += 1
    assert (sw.yyy_mask, sw.zzz_mask, sw.span) == (ps.yyy_msk, ps.zzz_msk, ps.size())
    assert [sw(x) for x in xs] == [ps(x) for x in xs]


@given(composed_layouts(inner=layouts(max_size=128)))
def test_composed_layout_function(X):
    if X.outer.shift == 0:
        excluded("ComposedLayout")  # (n)
        return
    P = pycute.ComposedLayout(pycute.Swizzle(X.outer.bits, X.outer.base, X.outer.shift), X.offset, py(X.inner))
    STATS["ComposedLayout"]["compared"] += 1
    assert [X(i) for i in range(lc.size(X))] == [P(i) for i in range(pycute.size(P))]


# ---------------------------------------------------------------------------------------------------------------
# pinned deviations: layoutc's (CuTe's) answer and pycute's different answer


def S(x):
    return lc.to_str(x) if not isinstance(x, pycute.Layout) else f"{_s(x.shape)}:{_s(x.stride)}"


def _s(t):
    return "(" + ",".join(_s(e) for e in t) + ")" if isinstance(t, tuple) else str(t)


def test_deviation_a_short_tiler_drops_modes():
    A = Layout((12, (4, 8)), (59, (13, 1)))
    assert S(lc.composition(A, (Layout(3, 4),))) == "(3):(236)"
    assert S(pycute.composition(py(A), (pycute.Layout(3, 4),))) == "(3,(4,8)):(236,(13,1))"


def test_deviation_b_unit_mode_strides():
    assert S(lc.composition(Layout(1, 4), Layout(1, 2))) == "1:8"
    assert S(pycute.composition(pycute.Layout(1, 4), pycute.Layout(1, 2))) == "1:0"
    assert S(lc.composition(Layout(1, 2), Layout(2, 64))) == "2:128"
    assert S(pycute.composition(pycute.Layout(1, 2), pycute.Layout(2, 64))) == "2:0"  # another function
    # coalesce_x keeps a trailing size-1 mode's stride
    assert S(lc.composition(Layout((4, 1), (1, 0)), Layout(8, 1))) == "(4,2):(1,0)"
    assert S(pycute.composition(pycute.Layout((4, 1), (1, 0)), pycute.Layout(8, 1))) == "8:1"


def test_deviation_c_left_inverse():
    assert S(lc.left_inverse(Layout((2, 3), (1, 4)))) == "(4,3):(1,2)"
    assert S(pycute.left_inverse(pycute.Layout((2, 3), (1, 4)))) == "(2,2,3):(1,6,2)"


def test_deviation_d_int_tiler_in_product():
    assert S(lc.logical_product(Layout(4, 1), 3)) == "(4,3):(1,4)"
    assert S(pycute.logical_product(pycute.Layout(4, 1), 3)) == "(3,2):(1,3)"  # a logical_divide


def test_deviation_e_no_divisibility_checks():
    with pytest.raises(lc.LayoutError, match="Shape Divisibility Condition"):
        lc.composition(Layout((4, 5), (1, 10)), Layout(6, 1))
    assert S(pycute.composition(pycute.Layout((4, 5), (1, 10)), pycute.Layout(6, 1))) == "4:1"  # size 4, not 6
    with pytest.raises(lc.LayoutError, match="Shape Divisibility Condition"):
        lc.logical_product(Layout(4, 2), Layout(3, 1))
    assert S(pycute.logical_product(pycute.Layout(4, 2), pycute.Layout(3, 1))) == "(4,2):(2,1)"  # size 8, not 12


def test_deviation_f_stride_check():
    assert S(lc.composition(Layout((4, 5), (1, 10)), Layout(2, 3))) == "2:3"
    with pytest.raises(AssertionError):
        pycute.composition(pycute.Layout((4, 5), (1, 10)), pycute.Layout(2, 3))


def test_deviation_g_right_inverse():
    assert S(lc.right_inverse(Layout((4, 2), (0, 1)))) == "2:4"  # [C]
    assert S(pycute.right_inverse(pycute.Layout((4, 2), (0, 1)))) == "1:0"
    assert S(lc.right_inverse(Layout((2, 3, 2), (1, 1, 2)))) == "(2,2):(1,6)"
    assert S(pycute.right_inverse(pycute.Layout((2, 3, 2), (1, 1, 2)))) == "2:1"
    assert S(lc.right_inverse(Layout((3, 2), (1, 1)))) == "3:1"
    assert S(pycute.right_inverse(pycute.Layout((3, 2), (1, 1)))) == "2:3"


def test_deviation_h_tiled_keeps_rank1_rest():
    assert S(lc.tiled_divide(Layout(8, 1), (4,))) == "((4),(2)):((1),(4))"
    assert S(pycute.tiled_divide(pycute.Layout(8, 1), (4,))) == "((4),2):((1),4)"
    assert S(lc.tiled_divide(Layout((8, 6, 2)), (4,))) == "((4),2,6,2):((1),4,8,48)"  # [C]
    assert S(pycute.tiled_divide(pycute.Layout((8, 6, 2)), (4,))) == "((4),2,6,2):((1),4,8,48)"


def test_deviation_i_idx2crd_past_the_end():
    assert lc.idx2crd(20, (3, (2, 3))) == (2, (0, 3))  # [C]
    assert pycute.idx2crd(20, (3, (2, 3))) == (2, (0, 0))


def test_deviation_j_default_strides_of_unit_leaves():
    assert S(Layout((2, 1, 3))) == "(2,1,3):(1,0,2)"
    assert S(pycute.Layout((2, 1, 3))) == "(2,1,3):(1,2,2)"


def test_deviation_k_cosize_negative_strides():
    assert lc.cosize(Layout((4, 2), (-1, 4))) == 8  # [C]
    assert pycute.cosize(pycute.Layout((4, 2), (-1, 4))) == 2


def test_deviation_l_divide_cotarget():
    # CuTe complements the tile in shape(coalesce(A)) = (3,5) (ceil_div folds), pycute in size(A) = 15
    A = Layout((3, 5), (1, 10))
    assert S(lc.complement(Layout(2, 1), (3, 5))) == "10:2"
    assert S(pycute.complement(pycute.Layout(2, 1), 15)) == "8:2"
    assert S(lc.logical_divide(A, Layout(2, 1))) == "(2,(2,5)):(1,(2,10))"
    with pytest.raises(AssertionError):  # pycute's own stride assert then rejects A ∘ 8:2
        pycute.logical_divide(py(A), pycute.Layout(2, 1))


def test_deviation_m_top_level_underscore_slice():
    L = Layout((4, 2), (1, 4))
    assert L(_) == L and Layout(8, 1)(_) == Layout(8, 1)  # CuTe's slice(_, t) is t
    sub, _off = pycute.slice_and_offset(None, py(L))
    assert S(sub) == "((4,2)):((1,4))"  # pycute wraps: (t)


def test_deviation_n_swizzle_zero_shift():
    assert lc.Swizzle(0, 3, 0)(150) == 150  # the identity
    with pytest.raises(RecursionError):
        pycute.Swizzle(0, 3, 0)(150)


def test_deviation_o_int_tiler_one():
    # [C] CuTe 4.2 compiled: an int tiler n is make_layout(n), and a size-1 mode of a compact layout has stride 0
    assert S(lc.logical_divide(Layout(7, 4), 1)) == "(1,7):(0,4)"
    assert S(pycute.logical_divide(pycute.Layout(7, 4), 1)) == "(1,7):(4,4)"
    assert S(lc.zipped_divide(Layout((8, 6)), (1, 2))) == "((1,2),(8,3)):((0,8),(1,16))"
    assert S(pycute.zipped_divide(pycute.Layout((8, 6), (1, 8)), (1, 2))) == "((1,2),(8,3)):((1,8),(1,16))"
