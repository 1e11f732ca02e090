"""Basis strides (CuTe's ScaledBasis E<i...>) and identity layouts: printing and parsing as CuTe prints them, values,
and the algebra on layouts of coordinates (coalesce, composition, divides, slicing)."""
import pytest
from hypothesis import assume, given, settings, strategies as st

import layoutc as lc
from layoutc import Layout, _
from layoutc.int_tuple import leaves, replace_leaves
from layoutc.strategies import refined_layouts, shapes, tilers_for

P = lc.parse
E = lc.basis


def zero_like(shape):
    """The zero coordinate of ``shape``: where CuTe's identity tensor starts (its iterator), so a layout value that
    leaves a mode out (stride 0 there) still reads as a full coordinate."""
    return replace_leaves(shape, lambda _s: 0)


def coordinate(layout_value, shape):
    return lc.arithmetic_sum(zero_like(shape), layout_value)


# -- printing, parsing, values ----------------------------------------------------------------------------------

def test_identity_layouts_print_as_cute_prints_them():
    # CuTe DSL notebook tensor.ipynb: make_identity_tensor((8,4)) prints "tensor<(0,0) o (8,4):(1@0,1@1)>"
    assert lc.to_str(lc.make_identity_layout((8, 4))) == "(8,4):(1@0,1@1)"
    # include/cute/numeric/arithmetic_tuple.hpp: make_basis_like appends each mode's index (E<0,1> is mode 0,
    # sub-mode 1) and print writes the indices in reverse: E<0,1> → "1@1@0"
    assert lc.to_str(lc.make_identity_layout(((2, 3), 4))) == "((2,3),4):((1@0@0,1@1@0),1@1)"
    assert lc.to_str(lc.make_identity_layout(8)) == "8:1"
    assert str(E(0, 1)) == "1@1@0" and str(3 * E(1)) == "3@1" and E() == 1


def test_basis_strides_parse_and_round_trip():
    for text in ["(8,4):(1@0,1@1)", "((2,3),4):((1@0@0,1@1@0),1@1)", "(64,128,1):(1@1,1@0,1@2)",
                 "(2,(4,8)):(16@1,(1@0,2@1))", "32:1@0", "(4,8):(-1@0,0)"]:
        assert lc.to_str(P(text)) == text
    assert P("(_8,_4):(_1@0,_1@1)") == lc.make_identity_layout((8, 4))   # C++ static markers
    assert P("1@1@0") == lc.ScaledBasis(1, (0, 1)) == E(0, 1)
    assert P("(4,8):(1@0,1@1)").stride == (E(0), E(1))


def test_identity_layout_values_are_coordinates():
    # CuTe DSL notebook tensor.ipynb: make_identity_tensor((8,5))[2] is (2,0) and [9] is (1,1)
    ident = lc.make_identity_layout((8, 5))
    assert ident(2) == (2, 0) and ident(9) == (1, 1)
    assert ident(3, 4) == (3, 4)
    nested = lc.make_identity_layout(((2, 3), 4))
    assert nested(5) == ((1, 2), 0) and nested((1, 2), 3) == ((1, 2), 3)
    assert lc.coshape(ident) == (8, 5) and lc.cosize(ident) == 40
    assert lc.coshape(nested) == ((2, 3), 4)


def test_arithmetic_tuples_add_as_cute_adds_them():
    # include/cute/numeric/arithmetic_tuple.hpp: E<0> + E<1> is (1,1); tuples pad with 0; only 0 adds to a tuple
    assert lc.arithmetic_sum(E(0), E(1)) == (1, 1)
    assert lc.arithmetic_sum((1, 2), (0, 0, 5)) == (1, 2, 5)
    assert lc.arithmetic_sum(0, 3 * E(1)) == (0, 3)
    assert lc.arithmetic_sum(E(0, 1), E(1)) == ((0, 1), 1)
    assert lc.as_arithmetic_tuple(2 * E(0, 1)) == ((0, 2),)
    with pytest.raises(lc.LayoutError) as info:
        lc.arithmetic_sum(3, (1, 2))
    assert str(info.value) == ("arithmetic_sum(3, (1,2)): Arithmetic tuple op+ error!: the integer 3 cannot be added "
                               "to the coordinate (1,2) (only 0 can)")


# -- the algebra on coordinate layouts -------------------------------------------------------------------------

def test_coalesce_merges_only_along_one_basis():
    assert lc.coalesce(lc.make_identity_layout((4, 8))) == lc.make_identity_layout((4, 8))
    assert lc.to_str(lc.coalesce(P("(4,8):(1@0,4@0)"))) == "32:1@0"
    assert lc.to_str(lc.coalesce(P("(4,1,8):(1@1,1@0,4@1)"))) == "32:1@1"


def test_divides_and_slices_of_an_identity_layout():
    ident = lc.make_identity_layout((4, 8))
    assert lc.to_str(lc.logical_divide(ident, (2, 4))) == "((2,2),(4,2)):((1@0,2@0),(1@1,4@1))"
    assert lc.to_str(lc.zipped_divide(ident, (2, 4))) == "((2,4),(2,2)):((1@0,1@1),(2@0,4@1))"
    sliced, origin = lc.slice_and_offset((_, 3), ident)
    assert lc.to_str(sliced) == "(4):(1@0)" and origin == (0, 3)
    tile, origin = lc.local_tile(lc.make_identity_layout((128, 128)), (32, 64), (1, 1))
    assert lc.to_str(tile) == "(32,64):(1@0,1@1)" and origin == (32, 64)
    part, origin = lc.local_partition(lc.make_identity_layout((8, 8)), lc.make_layout((4, 2)), 5)
    assert lc.to_str(part) == "(2,4):(4@0,2@1)" and origin == (1, 1)


def test_composition_of_an_identity_with_a_tv_layout():
    # the TV layout of media/docs/cpp/cute/03_tensor.md, "Thread-Value partitioning": (T8,V4) -> (M4,N8)
    tv = P("((2,4),(2,2)):((8,1),(4,16))")
    coords = lc.composition(lc.make_identity_layout((4, 8)), tv)
    assert lc.to_str(coords) == "((2,4),(2,2)):((2@1,1@0),(1@1,4@1))"
    assert coords(0, 0) == (0, 0) and coords(1, 3) == (0, 7) and coords(6, 0) == (3, 0)
    for t in range(8):
        for v in range(4):
            assert coordinate(coords(t, v), (4, 8)) == lc.idx2crd(tv(t, v), (4, 8))


def test_operations_that_need_integer_strides_refuse_basis_strides():
    ident = lc.make_identity_layout((4, 8))
    expected = "(1@0,1@1) has basis strides (a layout of coordinates, like make_identity_layout's)"
    for op, call in [("right_inverse", lambda: lc.right_inverse(ident)), ("left_inverse", lambda: lc.left_inverse(ident)),
                     ("complement", lambda: lc.complement(ident)), ("max_alignment", lambda: lc.max_alignment(ident)),
                     ("make_layout_like", lambda: lc.make_layout_like(ident))]:
        with pytest.raises(lc.LayoutError) as info:
            call()
        assert str(info.value) == f"{op}((4,8):(1@0,1@1)): defined for integer strides; {expected}"
    with pytest.raises(lc.LayoutError) as info:
        lc.upcast(ident, 2)
    assert str(info.value) == f"upcast((4,8):(1@0,1@1), 2): defined for integer strides; {expected}"
    with pytest.raises(lc.LayoutError) as info:
        lc.composition(Layout(32, 1), ident)
    assert str(info.value) == ("composition(32:1, (4,8):(1@0,1@1)): the rhs has basis strides: it must map to "
                               "indices of the lhs (only the lhs of a composition may map to coordinates)")
    with pytest.raises(lc.LayoutError) as info:
        P("(1@0,2):(1,1)")
    assert "shape 1@0 is neither an int nor a tuple of ints" in str(info.value)
    with pytest.raises(lc.LayoutError) as info:
        lc.parse_layout("1@0")
    assert "expected a layout shape:stride (or a composed layout) but found the basis stride 1@0" in str(info.value)


# -- laws ---------------------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(shapes(max_depth=3, max_rank=3, max_size=256))
def test_identity_layout_maps_every_index_to_its_coordinate(shp):
    ident = lc.make_identity_layout(shp)
    assert lc.parse(lc.to_str(ident)) == ident
    for i in range(lc.size(shp)):
        assert coordinate(ident(i), shp) == lc.idx2crd(i, shp)
    assert lc.coshape(ident) == shp


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_composition_of_the_identity_gives_idx2crd(data):
    shp = data.draw(shapes(max_depth=2, max_rank=3, max_size=256))
    # B's modes address disjoint digits of the identity's (never merged) modes: then no two of B's modes add up past
    # a mode of the identity, which integer strides would carry into the next mode and basis strides cannot
    # (CuTe's composition is the same algorithm for both: e.g. (6,4):(1@0,1@1) ∘ (2,2):(2,4) sums 2@0 + 4@0 = 6@0)
    b = data.draw(refined_layouts([s for s in leaves(shp) if s != 1] or [1], max_depth=2, max_rank=3))
    coords = lc.composition(lc.make_identity_layout(shp), b)
    for c in range(lc.size(b)):
        assert coordinate(coords(c), shp) == lc.idx2crd(b(c), shp)
    coalesced = lc.coalesce(coords)
    for c in range(lc.size(b)):
        assert coordinate(coalesced(c), shp) == coordinate(coords(c), shp)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_dividing_the_identity_divides_the_coordinates(data):
    shp = data.draw(shapes(max_depth=2, max_rank=3, max_size=256, allow_unit_modes=False))
    # a layout of the same shape whose leaves never merge (strides with growing gaps), like the identity's: tilers
    # drawn for it lie on the identity's grid (a tiler that splits one of its modes unevenly would need a carry
    # between modes, which integer strides make and basis strides cannot)
    gaps = iter(range(len(leaves(shp))))
    gapped = Layout(shp, replace_leaves(lc.make_layout(shp).stride, lambda d: d << next(gaps)))
    tiler = data.draw(tilers_for(gapped, allow_underscore=False, max_depth=2))
    ident = lc.make_identity_layout(shp)
    for divide in (lc.logical_divide, lc.zipped_divide):
        divided = divide(ident, tiler)
        reference = divide(gapped, tiler)
        assert divided.shape == reference.shape
        for i in range(lc.size(shp)):
            assert gapped(coordinate(divided(i), shp)) == reference(i)


def test_pictures_and_the_command_line_show_coordinates_in_cute_notation(capsys):
    from layoutc.cli import main
    svg = lc.make_identity_layout((4, 8))._repr_svg_()
    assert ">(1,3)</text>" in svg and "(1, 3)" not in svg
    main(["show", "(4,8):(1@0,1@1)"])
    out = capsys.readouterr().out
    assert "   1 (1,0) (1,1) (1,2) (1,3) (1,4) (1,5) (1,6) (1,7)" in out
    with pytest.raises(lc.LayoutError) as info:
        lc.max_common_vector(lc.make_identity_layout((4, 8)), Layout((4, 8)))
    assert str(info.value).startswith("max_common_vector((4,8):(1@0,1@1), (4,8):(1,4)): defined for integer strides")
