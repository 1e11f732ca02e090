"""make_layout_tv against CuTe's results and its bijection law."""
import numpy as np
from hypothesis import given, settings, strategies as st

import layoutc as lc


def test_make_layout_tv_row_major_threads_with_vectors():
    tiler, tv = lc.make_layout_tv(lc.parse_layout("(32,8):(8,1)"), lc.parse_layout("(1,8):(1,1)"))
    assert tiler == (32, 64)
    assert lc.to_str(tv) == "((8,32),8):((256,1),32)"


def test_make_layout_tv_column_major_threads_as_cute_tiled_copy():
    # make_tiled_copy(UniversalCopy<uint128_t>, float, Layout<Shape<_32,_8>>, Layout<Shape<_4,_1>>): 128x8 tile
    tiler, tv = lc.make_layout_tv(lc.make_layout((32, 8)), lc.make_layout((4, 1)))
    assert tiler == (128, 8)
    assert lc.to_str(tv) == "(256,4):(4,1)"   # thread t holds rows 4·t … 4·t + 3 of the column-major tile


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_make_layout_tv_is_a_bijection_onto_the_tile(tm, tn, vm, vn, row_major):
    threads = lc.make_ordered_layout((tm, tn), (1, 0) if row_major else (0, 1))
    tiler, tv = lc.make_layout_tv(threads, lc.make_layout((vm, vn)))
    assert lc.product_each(lc.shape(tv)) == (tm * tn, vm * vn)
    assert tiler == (tm * vm, tn * vn)
    image = sorted(tv(i) for i in range(lc.size(tv)))
    assert image == list(range(tm * vm * tn * vn))
