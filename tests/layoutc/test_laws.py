"""Algebraic laws of the layout algebra, each as its own hypothesis property.

The functions of layouts are computed with ``layoutc.strategies.layout_values`` (a direct evaluation of the flat
leaves, independent of ``Layout.__call__``) unless the law is about ``__call__``/``crd2idx`` itself.
Run with ``HYPOTHESIS_PROFILE=ci`` for 500 examples per law.
"""
from collections import Counter

import pytest
from hypothesis import assume, given, strategies as st

import layoutc as lc
from layoutc import Layout, _
from layoutc.int_tuple import is_tuple, leaves, replace_leaves, unflatten
from layoutc.strategies import (
    compact_layouts, composable_pairs, composed_layouts, divisors, factorization, image, injective_layouts,
    layout_values, layouts, refined_layouts, regroup, shapes, span, swizzles, tilers_for,
)

values = layout_values


def compose_values(a, b):
    """``[a(b(i)) for i < size(b)]`` with both functions evaluated directly."""
    bv = values(b)
    av = values(a, max(bv) + 1)
    return [av[x] for x in bv]


def tiler_layout(t):
    """The Layout an int or Layout tiler element stands for."""
    return Layout(t, 1) if isinstance(t, int) else t


def flat_pairs(layout):
    return list(zip(leaves(layout.shape), leaves(layout.stride)))


def mode_list(layout):
    return lc.modes(layout)


# ---------------------------------------------------------------------------------------------------------------
# coalesce and filter


@given(layouts(allow_negative_strides=True))
def test_coalesce_preserves_function(L):
    C = lc.coalesce(L)
    assert lc.size(C) == lc.size(L)
    assert lc.depth(C) <= 1
    assert values(C) == values(L)


@st.composite
def _profiles(draw, shape):
    """A by-mode profile for ``shape``: a tuple of rank <= rank(shape) of 1s or nested profiles."""
    if not is_tuple(shape):
        return (1,)
    k = draw(st.integers(1, len(shape)))
    out = []
    for s in shape[:k]:
        out.append(draw(_profiles(s)) if is_tuple(s) and draw(st.booleans()) else 1)
    return tuple(out)


def _check_by_mode_coalesce(L, profile, R):
    assert lc.rank(R) == lc.rank(L)
    ms, rs = mode_list(L), mode_list(R)
    for i, (m, r) in enumerate(zip(ms, rs)):
        if i >= len(profile):
            assert r == m  # modes past the profile are copied verbatim
        elif is_tuple(profile[i]):
            _check_by_mode_coalesce(m, profile[i], r)
        else:
            assert lc.size(r) == lc.size(m)
            assert lc.depth(r) <= 1
            assert values(r) == values(m)


@given(st.data())
def test_coalesce_by_mode_preserves_each_mode(data):
    L = data.draw(layouts(allow_negative_strides=True, max_depth=3))
    profile = data.draw(_profiles(L.shape))
    R = lc.coalesce(L, profile)
    _check_by_mode_coalesce(L, profile, R)


@given(layouts(allow_negative_strides=True))
def test_filter_keeps_image_and_drops_broadcast_and_unit_modes(L):
    F = lc.filter(L)
    assert image(F) == image(L)
    assert lc.depth(F) <= 1
    if F != Layout(1, 0):
        for s, d in flat_pairs(F):
            assert s != 1 and d != 0


# ---------------------------------------------------------------------------------------------------------------
# composition


@given(composable_pairs())
def test_composition_function_law(pair):
    A, B = pair
    AB = lc.composition(A, B)
    assert lc.compatible(B.shape, AB.shape)
    assert values(AB) == compose_values(A, B)


@given(composable_pairs(allow_negative_strides=True, allow_extension=False))
def test_composition_function_law_negative_lhs_strides(pair):
    A, B = pair
    AB = lc.composition(A, B)
    assert lc.compatible(B.shape, AB.shape)
    assert values(AB) == compose_values(A, B)


def _compose_by_mode_expected(L, t):
    if t is _:
        return L
    if isinstance(t, tuple):
        ms = mode_list(L)
        return lc.make_layout(*[_compose_by_mode_expected(m, ti) for m, ti in zip(ms, t)])
    return lc.composition(L, t)


def _check_tiler_function(L, t, R):
    if t is _:
        assert R == L
    elif isinstance(t, tuple):
        assert lc.rank(R) == len(t)  # modes of L past the tiler are dropped
        for m, ti, r in zip(mode_list(L), t, mode_list(R)):
            _check_tiler_function(m, ti, r)
    else:
        assert values(R) == compose_values(L, tiler_layout(t))


@given(st.data())
def test_composition_with_tuple_tiler_is_by_mode(data):
    L = data.draw(layouts())
    T = data.draw(tilers_for(L, allow_single=False))
    R = lc.composition(L, T)
    assert R == _compose_by_mode_expected(L, T)
    _check_tiler_function(L, T, R)


# ---------------------------------------------------------------------------------------------------------------
# complement


@given(injective_layouts(), st.integers(1, 4), st.integers(0, 1))
def test_complement_is_disjoint_and_fills_to_the_cotarget(L, k, exact):
    """For complementable L with span M (see ``span``) and any cotarget T >= 1, C = complement(L, T) has
    C(0) == 0, meets L only at 0, (L, C) is injective, and the image of (L, C) is exactly [0, M*ceil(T/M));
    in particular it is [0, T) iff T is a multiple of M."""
    M = span(L)
    T = k * M if exact else max(1, k * M - (M // 2))
    C = lc.complement(L, T)
    assert values(C, 1) == [0]
    assert image(L) & image(C) == {0}
    P = lc.make_layout(L, C)
    pv = values(P)
    assert len(set(pv)) == len(pv) == lc.size(L) * lc.size(C)
    covered = M * (-(-T // M))
    assert sorted(pv) == list(range(covered))
    if T % M == 0:
        assert sorted(pv) == list(range(T))


@given(injective_layouts())
def test_complement_default_cotarget(L):
    C = lc.complement(L)
    assert C == lc.complement(L, lc.cosize(lc.filter(L)))
    pv = values(lc.make_layout(L, C))
    assert sorted(pv) == list(range(span(L)))


# ---------------------------------------------------------------------------------------------------------------
# inverses


@given(layouts())
def test_right_inverse(L):
    R = lc.right_inverse(L)
    rv = values(R)
    lv = values(L, max(rv) + 1)
    assert [lv[x] for x in rv] == list(range(lc.size(R)))


@given(injective_layouts())
def test_left_inverse(L):
    Li = lc.left_inverse(L)
    lv = values(L)
    liv = values(Li, max(lv) + 1)
    assert [liv[x] for x in lv] == list(range(lc.size(L)))


# ---------------------------------------------------------------------------------------------------------------
# divides


def _check_divide(L, t, D):
    """Mode 0 of each divided mode is L∘t as a function; `_` leaves the mode; modes past a tuple tiler are kept."""
    if t is _:
        assert D == L
    elif isinstance(t, tuple):
        ms, ds = mode_list(L), mode_list(D)
        assert len(ds) == len(ms)
        for i, (m, d) in enumerate(zip(ms, ds)):
            if i < len(t):
                _check_divide(m, t[i], d)
            else:
                assert d == m
    else:
        assert lc.rank(D) == 2
        assert values(D[0]) == compose_values(L, tiler_layout(t))
        # with an exact tiler, (tile, rest) is a permutation of the mode's domain
        assert lc.size(D) == lc.size(L)
        assert sorted(values(D)) == sorted(values(L))


@given(st.data())
def test_logical_divide_tile_is_composition(data):
    L = data.draw(layouts())
    T = data.draw(tilers_for(L))
    D = lc.logical_divide(L, T)
    _check_divide(L, T, D)


def _expected_zip(D, t):
    """CuTe's zip2_by on the result of a logical divide/product: (tiles, rests) along the tiler's tree."""
    if isinstance(t, tuple):
        ms = mode_list(D)
        parts = [_expected_zip(ms[i], t[i]) for i in range(len(t))]
        return (lc.make_layout(*[p[0] for p in parts]),
                lc.make_layout(*[p[1] for p in parts], *ms[len(t):]))
    return D[0], D[1]


def _splice(layout):
    """The modes of ``layout`` CuTe's ``repeat<rank>(_)`` slice splices in: a rank-1 mode stays one mode."""
    return mode_list(layout) if lc.rank(layout) > 1 else [layout]


@given(st.data())
def test_zipped_tiled_flat_divide_regroup_logical_divide(data):
    """zipped/tiled/flat divide regroup the leaves of logical_divide: same size, same leaves (so the same
    multiset of values); Z = ((tiles), (rests, extra modes)); tiled = (Z0, Z1's modes...), flat = (Z0's modes...,
    Z1's modes...), where a rank-1 mode is not spliced. With a single Layout/int tiler Z is logical_divide itself
    (and tiled/flat splice its rest mode when that has rank > 1). Note: with a tuple tiler the 1-D
    enumeration order differs from logical_divide's (the modes are regrouped), so "same value at each 1-D index"
    is not a law; the coordinate map is the leaf regrouping checked here."""
    L = data.draw(layouts())
    T = data.draw(tilers_for(L, allow_underscore=False))
    D = lc.logical_divide(L, T)
    Z = lc.zipped_divide(L, T)
    Ti = lc.tiled_divide(L, T)
    F = lc.flat_divide(L, T)
    if isinstance(T, tuple):
        z0, z1 = _expected_zip(D, T)
        assert Z == lc.make_layout(z0, z1)
    else:
        assert Z == D
    assert Ti == lc.make_layout(Z[0], *_splice(Z[1]))
    assert F == lc.make_layout(*_splice(Z[0]), *_splice(Z[1]))
    assert Counter(flat_pairs(Z)) == Counter(flat_pairs(D))
    assert flat_pairs(Z) == flat_pairs(Ti) == flat_pairs(F)
    assert lc.size(Z) == lc.size(D)
    assert sorted(values(Z)) == sorted(values(D))


# ---------------------------------------------------------------------------------------------------------------
# products


@st.composite
def block_and_tiler(draw, max_size=256):
    """(A, B, C): A injective complementable, C = complement(A, size(A)*K), and B compact of size K whose leaves (in
    stride order) refine C's coalesced shape, so that C∘B is exact and logical_product(A, B) raises nothing."""
    A = draw(injective_layouts(max_size=max_size, max_cosize=1 << 10))
    N = lc.size(A)
    G = span(A) // N
    K = G * draw(st.integers(1, 6))
    C = lc.complement(A, N * K)
    flat = [s for s in leaves(lc.coalesce(C).shape) if s != 1]
    B = draw(refined_layouts(flat, full=True, allow_broadcast=False, extend=1))
    return A, B, C


@given(block_and_tiler())
def test_logical_product_then_divide_round_trip(abc):
    """P = logical_product(A, B) = (A, C∘B) with C = complement(A, size(A)*cosize(B)); dividing P by the int size(A)
    gives back A as mode 0 and C∘B as mode 1 (as functions)."""
    A, B, C = abc
    assert lc.cosize(B) == lc.size(B) == lc.size(C)
    assert lc.complement(A, lc.size(A) * lc.cosize(B)) == C
    P = lc.logical_product(A, B)
    assert P[0] == A
    cb = compose_values(C, B)
    assert values(P[1]) == cb
    D = lc.logical_divide(P, lc.size(A))
    assert values(D[0]) == values(A)
    assert values(D[1]) == cb


@given(injective_layouts(max_cosize=1 << 10), st.integers(1, 4))
def test_divide_identity_equals_product_with_identity(T, k):
    """For T injective and complementable with span M (see ``span``) and n a multiple of M:
    logical_divide(n:1, T) and logical_product(T, (n/size(T)):1) are the same function on [0, n)."""
    n = span(T) * k
    D = lc.logical_divide(lc.make_layout(n), T)
    P = lc.logical_product(T, lc.make_layout(n // lc.size(T)))
    assert lc.size(D) == lc.size(P) == n
    assert values(D) == values(P)


def _cute_zip_defined(t0, t1):
    """Whether CuTe's zip(t0, t1) of two layouts is defined: a non-tuple t0 wraps the pair without any check;
    a tuple t0 needs a tuple t1 of the same rank ("Mismatched Ranks" static_assert)."""
    if not is_tuple(t0.shape):
        return True
    return is_tuple(t1.shape) and len(t1.shape) == len(t0.shape)


def _padded_product(A, B):
    r = max(lc.rank(A), lc.rank(B))
    return lc.logical_product(lc.append(A, rank_to=r), lc.append(B, rank_to=r))


@given(block_and_tiler())
def test_blocked_and_raked_products_permute_logical_product(abc):
    """blocked_product = zip(P_0, P_1) and raked_product = zip(P_1, P_0) of P = logical_product of the rank-padded
    operands: wherever CuTe's zip is defined, both have the size and the multiset of values of logical_product(A, B)."""
    A, B, _C = abc
    P = lc.logical_product(A, B)
    Pp = _padded_product(A, B)
    expected = sorted(values(P))
    checked = False
    if _cute_zip_defined(Pp[0], Pp[1]):
        Bl = lc.blocked_product(A, B)
        assert lc.size(Bl) == lc.size(P)
        assert sorted(values(Bl)) == expected
        checked = True
    if _cute_zip_defined(Pp[1], Pp[0]):
        Ra = lc.raked_product(A, B)
        assert lc.size(Ra) == lc.size(P)
        assert sorted(values(Ra)) == expected
        checked = True
    assume(checked)


def test_blocked_product_integral_block_with_tuple_repeat():
    # P = logical_product(2:2, 4:1) = (2:2, (2,2):(1,4)); CuTe's zip with a non-tuple first element wraps the pair
    # without a rank check (tuple_algorithms.hpp): ((2,(2,2))):((2,(1,4)))
    assert lc.logical_product(Layout(2, 2), Layout(4, 1)) == Layout((2, (2, 2)), (2, (1, 4)))
    assert lc.blocked_product(Layout(2, 2), Layout(4, 1)) == Layout(((2, (2, 2)),), ((2, (1, 4)),))


def test_tile_to_shape_integral_atom_rank1_target():
    # tile_to_shape(4:1, (8)): padded = 4:1, repeat = make_ordered_layout((2), LayoutLeft) = (2):(1),
    # logical_product = (4,(2)):(1,(4)), CuTe zip -> ((4,(2))):((1,(4))) (the rank-1 (2) is kept)
    assert lc.blocked_product(Layout(4, 1), Layout((2,), (1,))) == Layout(((4, (2,)),), ((1, (4,)),))
    assert lc.tile_to_shape(Layout(4, 1), (8,)) == Layout(((4, (2,)),), ((1, (4,)),))


def test_blocked_product_rank1_tuple_block_with_rank2_repeat_is_an_error():
    # P = logical_product((2):(2), 4:1) = ((2),(2,2)):((2),(1,4)); zip((2), (2,2)) has mismatched ranks in CuTe
    # (its zip static_asserts equal ranks); layoutc once returned ((2,2)):((2,1)), dropping a mode
    with pytest.raises(lc.LayoutError, match="Mismatched Ranks"):
        lc.blocked_product(Layout((2,), (2,)), Layout(4, 1))


# ---------------------------------------------------------------------------------------------------------------
# tile_to_shape


@st.composite
def atom_and_target(draw):
    atom = draw(compact_layouts(max_size=64, max_rank=3))
    r = lc.rank(atom) + draw(st.integers(0, 1))
    padded = lc.append(atom, rank_to=r)
    bs = lc.product_each(padded.shape)
    target = []
    for b in bs:
        t = b * draw(st.integers(1, 4))
        fac = draw(factorization(t))
        target.append(draw(regroup(list(fac))) if len(fac) > 1 and draw(st.booleans()) else t)
    target = tuple(target)
    if r == 1 and draw(st.booleans()):
        target = lc.product(target)
    kind = draw(st.integers(0, 2))
    order = lc.LayoutLeft if kind == 0 else lc.LayoutRight if kind == 1 else tuple(draw(st.permutations(range(r))))
    return atom, target, order


@given(atom_and_target())
def test_tile_to_shape(case):
    atom, target, order = case
    R = lc.tile_to_shape(atom, target, order)
    assert lc.product_each(R.shape) == lc.product_each(target)
    r = len(target) if isinstance(target, tuple) else 1
    padded = lc.append(atom, rank_to=r)
    # on the first tile (each mode's coordinate < size of the padded atom's mode) the result is the atom
    for rm, am in zip(mode_list(R), mode_list(padded)):
        assert values(rm, lc.size(am)) == values(am)
    # a compact atom tiled by a compact repeat covers [0, size(target)) exactly once
    assert sorted(values(R)) == list(range(lc.product(target)))


# ---------------------------------------------------------------------------------------------------------------
# swizzles and composed layouts


@given(swizzles(), st.integers(0, 1 << 12))
def test_swizzle_is_a_bijection_on_aligned_blocks_and_an_involution(sw, block):
    n = sw.span
    assert n == 1 << (sw.base + sw.bits + abs(sw.shift))
    for base in (0, block * n):
        xs = range(base, base + n)
        ys = [sw(x) for x in xs]
        assert sorted(ys) == list(xs)
        assert [sw(y) for y in ys] == list(xs)


@given(swizzles(), st.lists(st.integers(0, 1 << 40), max_size=50))
def test_swizzle_involution_on_large_values(sw, xs):
    for x in xs:
        assert sw(sw(x)) == x


@given(swizzles(), layouts(max_size=256))
def test_composition_swizzle_layout_evaluates_swizzle_of_layout(sw, L):
    X = lc.composition(sw, L)
    if sw.bits == 0:
        assert X == L
    expected = [sw(v) for v in values(L)]
    assert [X(i) for i in range(lc.size(L))] == expected


@given(composed_layouts(inner=layouts(max_size=256)))
def test_composed_layout_call(X):
    inner = values(X.inner)
    assert [X(i) for i in range(lc.size(X))] == [X.outer(X.offset + v) for v in inner]
    shape = X.shape
    for i in range(0, lc.size(X), 7):
        assert X(lc.idx2crd(i, shape)) == X.outer(X.offset + inner[i])


@given(swizzles(), composable_pairs(max_size=256))
def test_composed_layout_composition_is_function_composition(sw, pair):
    A, B = pair
    X = lc.ComposedLayout(sw, 0, A)
    XB = lc.composition(X, B)
    if sw.bits == 0:
        # CuTe rebuilds the result with composition(Sw, 0, A∘B), which drops an identity swizzle at offset 0
        assert XB == lc.composition(A, B)
    else:
        assert XB.outer == sw and XB.offset == 0
    assert values(XB) == [sw(v) for v in compose_values(A, B)]


# ---------------------------------------------------------------------------------------------------------------
# upcast / downcast


@st.composite
def compact_with_vector(draw):
    """(L, u, n): L compact with size > 1, u the flat index of its stride-1 leaf, n > 1 dividing that leaf."""
    L = draw(compact_layouts())
    pairs = flat_pairs(L)
    units = [i for i, (s, d) in enumerate(pairs) if d == 1]
    assume(units)
    u = units[0]
    n = draw(st.sampled_from(divisors(pairs[u][0])[1:]))
    return L, u, n


def _replace_leaf(layout, u, shape, stride):
    s = leaves(layout.shape)
    d = leaves(layout.stride)
    s[u], d[u] = shape, stride
    return Layout(unflatten(s, layout.shape), unflatten(d, layout.stride))


@given(compact_with_vector())
def test_upcast_groups_the_vector_leaf(case):
    """For compact L whose stride-1 leaf has shape s with n | s: upcast(L, n) divides that leaf's shape by n and every
    other nonzero stride by n (all are multiples of s), and evaluates as U(c) == L(c with the vector coordinate
    scaled by n) // n. downcast undoes it exactly unless another leaf of U ends up with stride 1."""
    L, u, n = case
    U = lc.upcast(L, n)
    s_u = leaves(L.shape)[u]
    assert U == _replace_leaf(Layout(L.shape, replace_leaves(L.stride, lambda d: d // n)), u, s_u // n, 1)
    scaled = _replace_leaf(L, u, s_u // n, n)
    assert values(U) == [v // n for v in values(scaled)]
    others_unit = [i for i, (s, d) in enumerate(flat_pairs(U)) if d == 1 and i != u]
    if not others_unit:
        assert lc.downcast(U, n) == L


@st.composite
def colmajor_and_boundary(draw):
    """(L, n): L = make_layout(shape) column-major and n a prefix product of a refinement of its leaves."""
    shp = draw(shapes(allow_unit_modes=True))
    L = lc.make_layout(shp)
    refined = []
    for s in leaves(shp):
        refined.extend(draw(factorization(s)))
    k = draw(st.integers(1, max(1, len(refined))))
    n = 1
    for f in refined[:k]:
        n *= f
    assume(n > 1)
    return L, n


@given(colmajor_and_boundary())
def test_upcast_of_colmajor_is_identity_on_the_coarse_grid(case):
    """For column-major L and n a prefix product of a refinement of its shape: upcast(L, n)(j) == L(j*n)//n == j for
    j < size(L)/n, and size(upcast(L, n)) == size(L)/n."""
    L, n = case
    U = lc.upcast(L, n)
    m = lc.size(L) // n
    assert lc.size(U) == m
    lv = values(L)
    assert values(U) == [lv[j * n] // n for j in range(m)] == list(range(m))


# ---------------------------------------------------------------------------------------------------------------
# crd2idx / idx2crd


@given(st.data())
def test_crd2idx_idx2crd_round_trip(data):
    L = data.draw(layouts(allow_negative_strides=True, max_depth=3))
    S, D = L.shape, L.stride
    n = lc.size(L)
    idx = data.draw(st.lists(st.integers(0, 2 * n - 1), min_size=1, max_size=24))
    lv = values(L, 2 * n)
    for i in idx:
        c = lc.idx2crd(i, S)
        assert lc.crd2idx(c, S, D) == lv[i]
        assert L(c) == L(i) == lv[i]
        if i < n:
            assert lc.congruent(c, S)
            assert lc.crd2idx(c, S) == i
