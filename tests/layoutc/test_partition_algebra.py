"""CuTe's partitioning on layouts: inner_partition, outer_partition, local_tile, local_partition, and the small
helpers they build on (slice_and_offset, crd2crd, slice/dice on tuples, round_up, elem_less, max_alignment, ...).

Exact results come from CuTe's own docs and headers (each test says where); laws are checked with hypothesis and the
divide/slice results against pycute's independent model.
"""
from collections import Counter

import pytest
from hypothesis import assume, given, settings, strategies as st

import layoutc as lc
from layoutc import Layout, _
from layoutc.int_tuple import idx2crd_strided, leaves
from layoutc.strategies import compact_layouts, tilers_for

try:
    import pycute
except ImportError:   # the oracle comes with the nvidia-cutlass test dependency; without it its tests skip
    pycute = None
needs_pycute = pytest.mark.skipif(pycute is None, reason="pycute (nvidia-cutlass) is not installed")

P = lc.parse


def S(pair):
    """(layout, offset) as text, for exact comparisons."""
    layout, offset = pair
    return f"{lc.to_str(layout)} @ {lc.to_str(offset)}"


# -- exact results from CuTe's docs ------------------------------------------------------------------------------

def test_inner_and_outer_partition_of_the_tensor_docs_example():
    # media/docs/cpp/cute/03_tensor.md, "Inner and outer partitioning": A = (8,24), tiler Shape<_4,_8>,
    # zipped_divide → ((_4,_8),(2,3)); cta_a = tiled_a((_,_), (bx,by)) → (_4,_8); thr_a = tiled_a(tid, (_,_)) → (2,3)
    a = lc.make_layout((8, 24))
    assert lc.to_str(lc.zipped_divide(a, (4, 8))) == "((4,8),(2,3)):((1,8),(4,64))"
    assert S(lc.inner_partition(a, (4, 8), (1, 2))) == "(4,8):(1,8) @ 132"        # rows 4..7, columns 16..23
    assert S(lc.local_tile(a, (4, 8), (1, 2))) == "(4,8):(1,8) @ 132"            # local_tile is inner_partition
    assert S(lc.outer_partition(a, (4, 8), 9)) == "(2,3):(4,64) @ 17"            # thread 9 = (1,2) of the tile
    assert S(lc.outer_partition(a, (4, 8), (1, 2))) == "(2,3):(4,64) @ 17"


def test_slice_and_offset_of_the_tensor_docs_slicing_examples():
    # media/docs/cpp/cute/03_tensor.md, "Slicing a Tensor": A = ((3,2),(2,5,2)):((4,1),(2,13,100)) and the printed
    # layouts of B..F; the offsets are what the doc's iterators advance by (A evaluated at the fixed coordinate)
    a = P("((3,2),(2,5,2)):((4,1),(2,13,100))")
    assert S(lc.slice_and_offset((2, _), a)) == "((2,5,2)):((2,13,100)) @ 8"
    assert S(lc.slice_and_offset((_, 5), a)) == "((3,2)):((4,1)) @ 28"
    assert S(lc.slice_and_offset(((_, _), 5), a)) == "(3,2):(4,1) @ 28"
    assert S(lc.slice_and_offset(((_, 1), (0, _, 1)), a)) == "(3,5):(4,13) @ 101"
    assert S(lc.slice_and_offset(((2, _), (_, 3, _)), a)) == "(2,2,2):(1,2,100) @ 47"


def test_local_tile_and_local_partition_of_the_gemm_tutorial():
    # media/docs/cpp/cute/0x_gemm_tutorial.md (sgemm_1, M-major A and C): cta_tiler (128,128,8), cta_coord
    # (bx,by,_) with Step<_1,X,_1> gives gA (BLK_M,BLK_K,k); tA = (32,8) gives tAgA (THR_M,THR_K,k) = (4,1,k),
    # tAsA (4,1); tC = (16,16) with Step<_1,X> gives tCsA (THR_M,BLK_K) = (8,8), and tCgC (THR_M,THR_N) = (8,8).
    m, n, k = 256, 384, 64
    m_a = Layout((m, k), (1, m))
    m_c = Layout((m, n), (1, m))
    tiler, coord = (128, 128, 8), (1, 2, _)
    g_a = lc.local_tile(m_a, tiler, coord, proj=(1, _, 1))
    assert S(g_a) == "(128,8,8):(1,256,2048) @ 128"
    g_c = lc.local_tile(m_c, tiler, coord, proj=(1, 1, _))
    assert S(g_c) == "(128,128):(1,256) @ 65664"                               # 128 + 2·128·256
    t_a = lc.make_layout((32, 8))
    assert S(lc.local_partition(g_a[0], t_a, 37)) == "(4,1,8):(32,0,2048) @ 261"  # thread 37 = (5,1)
    s_a = lc.make_layout((128, 8))
    assert S(lc.local_partition(s_a, t_a, 37)) == "(4,1):(32,0) @ 133"
    t_c = lc.make_layout((16, 16))
    assert S(lc.local_partition(s_a, t_c, 37, proj=(1, _))) == "(8,8):(16,128) @ 5"    # 37 = (5,2): row 5
    assert S(lc.local_partition(g_c[0], t_c, 37)) == "(8,8):(16,4096) @ 517"           # (5,2) → 5 + 2·256


def test_local_partition_numbers_threads_by_the_thread_layouts_inverse():
    # include/cute/tensor_impl.hpp's local_partition comment: data (_16,_64), Layout<Shape<_2,_16>> → (_8,_4);
    # get_flat_coord inverts the thread layout, so a row-major thread layout numbers threads along rows
    data = Layout((16, 64), (64, 1))
    assert S(lc.local_partition(data, lc.make_layout((2, 16)), 17)) == "(8,4):(128,16) @ 72"   # (1,8) col-major
    assert S(lc.local_partition(data, Layout((2, 16), (16, 1)), 17)) == "(8,4):(128,16) @ 65"  # (1,1) row-major
    assert lc.flat_coord(Layout((2, 16), (16, 1)), 17) == (1, 1)
    assert lc.flat_coord(P("(2,(4,2)):(8,(1,4))"), 13) == (1, 5)
    assert lc.flat_coord(Layout(32, 1), 7) == 7


def test_local_partition_with_a_projection_of_a_broadcast_thread_layout():
    # include/cute/tensor_impl.hpp's local_partition comment: thr_layout (_2,_16,_1):(_16,_1,_0) with
    # Step<_1,X,_1> partitions A (M,K) into (M/2, K/1)
    thr = P("(2,16,1):(16,1,0)")
    a = lc.make_layout((16, 8))
    assert S(lc.local_partition(a, thr, 17, proj=(1, _, 1))) == "(8,8):(2,16) @ 1"
    b = lc.make_layout((32, 8))
    assert S(lc.local_partition(b, thr, 17, proj=(_, 1, 1))) == "(2,8):(16,32) @ 1"    # (N/16, K/1)


def test_partitioning_a_swizzled_layout_keeps_the_offset_inside():
    # include/cute/layout_composed.hpp: slice_and_offset of a ComposedLayout adds the offset to O, returns 0
    sw = P("Sw<3,4,3> o 0 o (8,64):(64,1)")
    assert S(lc.inner_partition(sw, (8, 16), (0, 2))) == "Sw<3,4,3> o 32 o (8,16):(64,1) @ 0"
    assert S(lc.outer_partition(sw, (1, 8), (0, 3))) == "Sw<3,4,3> o 3 o (8,8):(64,8) @ 0"
    tile, offset = lc.local_tile(sw, (4, 8), (1, 1))
    layout_tile, layout_offset = lc.local_tile(sw.inner, (4, 8), (1, 1))
    for i in range(lc.size(tile)):
        assert tile(i) == sw.outer(layout_offset + layout_tile(i))


def test_partitioning_accepts_every_tiler_form_of_the_divides():
    a = lc.make_layout((8, 16))
    by_shape = lc.inner_partition(a, (4, 8), (1, 1))
    assert lc.inner_partition(a, lc.parse_tiler("<4:1,8:1>"), (1, 1)) == by_shape
    assert lc.inner_partition(a, (Layout(4, 1), 8), (1, 1)) == by_shape
    assert S(lc.inner_partition(a, lc.parse_tiler("<2:2,4:4>"), (1, 1))) == "(2,4):(2,32) @ 9"
    assert S(lc.inner_partition(a, Layout(32, 1), 1)) == "(32):(1) @ 32"   # a Layout tiler: rank-1 tile mode
    nested = lc.make_layout((8, (4, 4)))
    assert S(lc.local_tile(nested, (4, (2, 2)), (1, (1, 1)))) == "(4,(2,2)):(1,(8,32)) @ 84"


# -- small helpers -------------------------------------------------------------------------------------------------

def test_int_tuple_helpers_as_cute_defines_them():
    # include/cute/int_tuple.hpp: round_up pads b with 1s; elem_less is "all less", a shorter a compares its own modes
    assert lc.round_up(7, 4) == 8
    assert lc.round_up((7, 5, 3), (4, 2)) == (8, 6, 3)
    assert lc.elem_less((1, 7), (4, 8)) and not lc.elem_less((1, 8), (4, 8))
    assert lc.elem_less((1,), (4, 8)) and not lc.elem_less((1, 2, 3), (4, 8))
    assert lc.elem_leq((4, 8), (4, 8)) and lc.elem_leq((1, 9), (4, 8))        # not elem_less(b, a)
    assert lc.elem_less(((1, 2), 3), ((2, 3), 4))
    # include/cute/stride.hpp: crd2crd goes mode by mode where all three are tuples, else through the index
    assert lc.crd2crd((1, (1, 2)), (3, (2, 3)), (3, 6)) == (1, 5)
    assert lc.crd2crd(5, 6, (2, 3)) == (1, 2)
    assert lc.crd2crd((1, 2), (2, 3), 6) == 5
    # include/cute/underscore.hpp: slice keeps the _ elements, dice the others; the entry points keep the whole
    assert lc.slice_tuple((_, (1, _)), (2, (3, 4))) == (2, 4)
    assert lc.slice_tuple(_, (2, 3)) == (2, 3) and lc.slice_tuple(1, (2, 3)) == ()
    assert lc.dice_tuple((1, _, 1), (32, 64, 4)) == (32, 4)
    assert lc.dice_tuple(1, (2, 3)) == (2, 3) and lc.dice_tuple(_, (2, 3)) == ()
    # the reference sheet's [C] results for the helpers that already existed
    assert lc.product_each(6) == (6,) and lc.product_each((2, (3, 4))) == (2, 12)
    assert lc.shape_div((4, 5, 6), 40) == (1, 1, 3) and lc.shape_div(3, 6) == 1 and lc.shape_div(6, (2, 3)) == 1
    assert idx2crd_strided(17, (2, 16), (16, 1)) == (1, 1)


def test_coshape_domain_offset_and_max_alignment():
    # include/cute/layout.hpp coshape: (shape-1)·|stride| + 1 per codomain mode; domain_offset keeps a plain layout
    assert lc.coshape(Layout((4, 2), (1, 8))) == 12
    assert lc.coshape(Layout((4, 2), (-1, 8))) == 12
    assert lc.domain_offset((1, 1), Layout((4, 2), (1, 4))) == (Layout((4, 2), (1, 4)), 5)
    sw = P("Sw<3,4,3> o 0 o (8,64):(64,1)")
    assert S(lc.domain_offset((0, 1), sw)) == "Sw<3,4,3> o 1 o (8,64):(64,1) @ 0"
    # include/cute/layout.hpp max_alignment: gcd(size<0>(P), stride<1>(P)), P = logical_divide(F, right_inverse(F))
    assert lc.max_alignment(Layout((4, 8), (1, 4))) == 32
    assert lc.max_alignment(Layout((4, 8), (1, 8))) == 4
    assert lc.max_alignment(Layout((8, 4), (4, 1))) == 32
    assert lc.max_alignment(Layout((4, 8), (2, 8))) == 1
    # include/cute/swizzle_layout.hpp: a swizzle keeps 2^M elements together; gcd with the offset and the layout
    assert lc.max_alignment(lc.Swizzle(3, 4, 3)) == 16
    assert lc.max_alignment(sw) == 16
    assert lc.max_alignment(P("Sw<3,4,3> o 8 o (8,64):(64,1)")) == 8


def test_cute_dsl_spellings_parse():
    # CuTe DSL's MLIR types print composed layouts as "S<3,4,3> o 0 o ..." (e.g. !cute.composed_layout<"S<3,4,3> o 0
    # o ((128,16),1,4):((64,1),0,16)">) and TMA bases as "(64,128,1):(1@1,1@0,1@2)"
    dsl = P("S<3,4,3> o 0 o ((128,16),1,4):((64,1),0,16)")
    assert dsl == P("Sw<3,4,3> o 0 o ((128,16),1,4):((64,1),0,16)")
    assert lc.to_str(dsl) == "Sw<3,4,3> o 0 o ((128,16),1,4):((64,1),0,16)"
    assert P("S<2,4,3>") == lc.Swizzle(2, 4, 3)
    gbasis = P("(64,128,1):(1@1,1@0,1@2)")
    assert lc.to_str(gbasis) == "(64,128,1):(1@1,1@0,1@2)"


# -- errors ----------------------------------------------------------------------------------------------------------

def test_partition_errors_name_the_operation_and_operands():
    a = lc.make_layout((8, 8))
    with pytest.raises(lc.LayoutError) as info:
        lc.local_tile(a, (4, 4), (1, 1, 1))
    assert str(info.value) == ("inner_partition((8,8):(1,8), (4,4), (1,1,1)): the coordinate (1,1,1) has rank 3 but "
                               "the divided layout has only 2 such modes")
    with pytest.raises(lc.LayoutError) as info:
        lc.local_partition(a, lc.make_layout((4, 2)), 8)
    assert str(info.value) == ("local_partition((8,8):(1,8), (4,2):(1,4), 8): thread index 8 is outside the thread "
                               "layout of size 8")
    with pytest.raises(lc.LayoutError) as info:
        lc.local_partition(a, Layout((4, 2), (0, 1)), 3)
    assert str(info.value).startswith("local_partition((8,8):(1,8), (4,2):(0,1), 3): the stride 0 of a mode of size "
                                      "4 cannot be inverted")
    with pytest.raises(lc.LayoutError) as info:
        lc.outer_partition(a, (4, _), (1, 1))
    assert str(info.value).startswith("outer_partition((8,8):(1,8), (4,_), (1,1)): _ in a zipped/tiled/flat tiler")
    with pytest.raises(lc.LayoutError) as info:
        lc.round_up((7, 5), (4, 2, 1))
    assert str(info.value) == "round_up((7,5), (4,2,1)): Mismatched ranks: rank(a) = 2 < rank(b) = 3"
    with pytest.raises(lc.LayoutError) as info:
        lc.crd2crd((1, 2), (2, 3), (6,))
    assert str(info.value) == ("crd2crd((1,2), (2,3), (6)): Mismatched Ranks: the coordinate has rank 2, the shapes 2 "
                               "and 1")
    with pytest.raises(lc.LayoutError) as info:
        lc.slice_tuple((_, 1), (2, 3, 4))
    assert str(info.value) == "slice((_,1), (2,3,4)): Mismatched Ranks: the coordinate (_,1) does not match (2,3,4)"


# -- laws -----------------------------------------------------------------------------------------------------------

@st.composite
def layout_and_tiler(draw, allow_single=True):
    layout = draw(compact_layouts(max_depth=2, max_rank=3, max_size=256, allow_unit_modes=False))
    tiler = draw(tilers_for(layout, allow_underscore=False, allow_single=allow_single, max_depth=2))
    return layout, tiler


@settings(max_examples=150, deadline=None)
@given(layout_and_tiler(), st.data())
def test_local_tile_agrees_with_the_zipped_divide(pair, data):
    layout, tiler = pair
    zipped = lc.zipped_divide(layout, tiler)
    tile_index = data.draw(st.integers(0, lc.size(zipped[1]) - 1))
    tile, offset = lc.local_tile(layout, tiler, tile_index)
    assert lc.size(tile) == lc.size(zipped[0])
    for i in range(lc.size(tile)):
        assert offset + tile(i) == zipped(i, tile_index)


@settings(max_examples=150, deadline=None)
@given(layout_and_tiler())
def test_outer_partitions_cover_the_layout_exactly_once(pair):
    layout, tiler = pair
    zipped = lc.zipped_divide(layout, tiler)
    seen = Counter()
    for coord in range(lc.size(zipped[0])):
        part, offset = lc.outer_partition(layout, tiler, coord)
        seen.update(offset + part(i) for i in range(lc.size(part)))
    assert seen == Counter(layout(i) for i in range(lc.size(layout)))


@st.composite
def tile_and_threads(draw):
    thread_shape = (draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    repeats = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    tile_shape = (thread_shape[0] * repeats[0], thread_shape[1] * repeats[1])
    threads = lc.make_ordered_layout(thread_shape, draw(st.sampled_from([(0, 1), (1, 0)])))
    return tile_shape, threads


@settings(max_examples=120, deadline=None)
@given(tile_and_threads())
def test_local_partition_of_the_tiles_coordinates_covers_the_tile_once(case):
    tile_shape, threads = case
    coordinates = lc.make_identity_layout(tile_shape)
    # CuTe's identity tensor starts at the zero coordinate; a mode the divide turned into stride 0 adds nothing
    zero = (0, 0)
    owners = Counter()
    for t in range(lc.size(threads)):
        part, origin = lc.local_partition(coordinates, threads, t)
        assert lc.size(part) == lc.size(tile_shape) // lc.size(threads)
        owners.update(lc.arithmetic_sum(lc.arithmetic_sum(zero, origin), part(v)) for v in range(lc.size(part)))
    every = [lc.idx2crd(i, tile_shape) for i in range(lc.size(tile_shape))]
    assert owners == Counter(every)


@settings(max_examples=120, deadline=None)
@given(tile_and_threads())
def test_local_partition_of_a_data_layout_matches_its_coordinates(case):
    tile_shape, threads = case
    data = lc.make_layout(tile_shape, lc.LayoutRight)
    coordinates = lc.make_identity_layout(tile_shape)
    for t in range(lc.size(threads)):
        part, offset = lc.local_partition(data, threads, t)
        cpart, origin = lc.local_partition(coordinates, threads, t)
        for v in range(lc.size(part)):
            assert offset + part(v) == data(lc.arithmetic_sum(lc.arithmetic_sum((0, 0), origin), cpart(v)))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_make_layout_tv_composed_with_the_identity_gives_each_values_coordinate(tm, tn, vm, vn, row_major):
    threads = lc.make_ordered_layout((tm, tn), (1, 0) if row_major else (0, 1))
    tiler, tv = lc.make_layout_tv(threads, lc.make_layout((vm, vn)))
    coords = lc.composition(lc.make_identity_layout(tiler), tv)
    zero = tuple(0 for _s in tiler)
    seen = set()
    for t in range(lc.size(threads)):
        for v in range(vm * vn):
            crd = lc.arithmetic_sum(zero, coords(t, v))
            assert crd == lc.idx2crd(tv(t, v), tiler)
            seen.add(crd)
    assert len(seen) == lc.size(tiler)   # a bijection onto the tile


# -- pycute as an oracle --------------------------------------------------------------------------------------------

def _py(x):
    if x is _:
        return None
    if isinstance(x, Layout):
        return pycute.Layout(x.shape, x.stride)
    if isinstance(x, tuple):
        return tuple(_py(e) for e in x)
    return x


@needs_pycute
@settings(max_examples=150, deadline=None)
@given(layout_and_tiler(allow_single=False), st.data())
def test_inner_and_outer_partition_against_pycute(pair, data):
    layout, tiler = pair
    # pycute's known deviations (test_pycute_diff.py (b), (o)): size-1 tiles and modes are left out
    assume(all(s > 1 for s in leaves(layout.shape)))
    assume(all(t != 1 for t in leaves(tiler) if type(t) is int))
    assume(all(s > 1 for t in leaves(tiler) if isinstance(t, Layout) for s in leaves(t.shape)))
    zipped = lc.zipped_divide(layout, tiler)
    py_zipped = pycute.zipped_divide(_py(layout), _py(tiler))
    assert (py_zipped.shape, py_zipped.stride) == (zipped.shape, zipped.stride)
    r0, r1 = lc.rank(zipped[0]), lc.rank(zipped[1])
    rest = data.draw(st.integers(0, lc.size(zipped[1]) - 1))
    inner, offset = lc.inner_partition(layout, tiler, rest)
    keep0 = None if r0 == 1 else (None,) * r0
    py_inner, py_offset = pycute.slice_and_offset((keep0, rest), py_zipped)
    assert (inner.shape, inner.stride, offset) == (py_inner.shape, py_inner.stride, py_offset)
    within = data.draw(st.integers(0, lc.size(zipped[0]) - 1))
    outer, offset = lc.outer_partition(layout, tiler, within)
    keep1 = None if r1 == 1 else (None,) * r1
    py_outer, py_offset = pycute.slice_and_offset((within, keep1), py_zipped)
    assert (outer.shape, outer.stride, offset) == (py_outer.shape, py_outer.stride, py_offset)


@needs_pycute
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_crd2crd_and_slice_tuple_against_pycute(data):
    from layoutc.strategies import shapes
    shp = data.draw(shapes(max_depth=3, max_rank=3, max_size=256))
    n = lc.size(shp)
    i = data.draw(st.integers(0, n - 1))
    coord = lc.idx2crd(i, shp)
    assert lc.crd2crd(i, n, shp) == pycute.crd2crd(i, shp) == coord
    assert lc.crd2crd(coord, shp, n) == pycute.crd2crd(coord, n, shp) == i
    if type(shp) is tuple:
        marks = tuple(data.draw(st.sampled_from([_, 0])) for _s in shp)
        assert lc.slice_tuple(marks, shp) == pycute.slice_(_py(marks), shp)
