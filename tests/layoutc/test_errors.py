"""Every violated precondition raises LayoutError naming the op, the operands in CuTe notation and the condition."""
import pytest

import layoutc as lc
from layoutc import Layout as L, _

SW = lc.Swizzle(3, 4, 3)

ERRORS = [
    # construction
    (lambda: L((2, 3), (1,)), "Layout((2,3), (1)): shape and stride are not congruent"),
    (lambda: L((2, 3), 1), "Layout((2,3), 1): shape and stride are not congruent"),
    (lambda: L(0, 1), "Layout(0, 1): shape 0 is not positive"),
    (lambda: L((4, -2), (1, 4)), "shape -2 is not positive"),
    (lambda: L((), ()), "empty tuple in shape"),
    (lambda: L((2, "3"), (1, 2)), "is neither an int nor a tuple of ints"),
    (lambda: L((2, 3), (1, 2.5)), "stride 2.5 is neither an int"),
    # IntTuple helpers
    (lambda: lc.shape_div(6, 4), "shape_div(6, 4): Divisibility Condition"),
    (lambda: lc.shape_div((2, 3), (1, 2, 3)), "Mismatched ranks"),
    (lambda: lc.ceil_div((2,), (1, 2)), "Mismatched ranks"),
    (lambda: lc.crd2idx((1, 2), 4, 1), "Invalid parameters"),
    (lambda: lc.crd2idx((1, 2, 3), (4, 4), (1, 4)), "Mismatched Ranks"),
    (lambda: lc.idx2crd((1, 2), 4), "Invalid parameters"),
    # calling, getting, slicing, taking
    (lambda: L((4, 2))((1, 2, 3)), "Mismatched Ranks"),
    (lambda: L(8, 1)((1, 2)), "Invalid parameters"),
    (lambda: L(8, 1)[1], "get(8:1, 1): Index out of range"),
    (lambda: L((8, 2))[2], "Index out of range: rank is 2"),
    (lambda: L((4, 2))((_, 1, 2)), "Mismatched Ranks"),
    (lambda: lc.take(L((2, 3, 4)), 1, 1), "take: empty range error"),
    (lambda: lc.take(L((2, 3, 4)), 1, 4), "take: range out of bounds"),
    (lambda: lc.zip_layouts(L((2, 3, 4)), L((2, 3))), "Mismatched Ranks"),
    # coalesce / filter
    (lambda: lc.coalesce(L((2, 3)), (1, 1, 1)), "coalesce((2,3):(1,2), (1,1,1)): profile rank 3 exceeds layout rank 2"),
    (lambda: lc.filter(L(4, 1), (1, 1)), "filter(4:1, (1,1)): profile rank 2 exceeds layout rank 1"),
    # composition
    (lambda: lc.composition(L((4, 5), (1, 10)), L(6, 1)), "composition((4,5):(1,10), 6:1): Shape Divisibility Condition"),
    (lambda: lc.composition(L((4, 5), (1, 10)), L(1, 6)), "composition((4,5):(1,10), 1:6): Stride Divisibility Condition"),
    (lambda: lc.composition(L((4, 5)), (2, 5, 1)), "tiler rank 3 exceeds layout rank 2"),
    (lambda: lc.composition(L((4, 5)), 0), "tiler size 0 is not positive"),
    (lambda: lc.composition(L((4, 5)), "4"), "a tiler is a Layout, an int, _ or a tuple of those"),
    (lambda: lc.composition(L(8, 1), lc.ComposedLayout(SW, 64, L(8, 1))), "Require offset == 0"),
    (lambda: lc.composition(SW, lc.Swizzle(2, 4, 2)), "Can only merge swizzles of the same shift."),
    # complement
    (lambda: lc.complement(L((2, 2), (1, 1))), "complement((2,2):(1,1), 3): Non-injective Layout detected in complement."),
    (lambda: lc.complement(L((4, 2), (1, 3)), 16), "Non-injective Layout detected in complement."),
    (lambda: lc.complement(L(4, -1), 8), "complement(4:-1, 8): negative strides have no complement"),
    # inverses
    (lambda: lc.left_inverse(L((2, 3), (3, 2))), "left_inverse((2,3):(3,2)): Left inverse divisibility condition"),
    (lambda: lc.left_inverse(L(4, -1)), "negative strides have no left inverse layout"),
    (lambda: lc.right_inverse(lc.ComposedLayout(SW, 0, L((8, 64), (64, 1)))), "the inverse of a ComposedLayout"),
    (lambda: lc.left_inverse(lc.ComposedLayout(SW, 0, L((8, 64), (64, 1)))), "the inverse of a ComposedLayout"),
    # divides and products
    (lambda: lc.logical_divide(L((8, 6)), (2, 2, 2)), "logical_divide: Too many modes in tiler"),
    (lambda: lc.logical_product(L((8, 6)), (2, 2, 2)), "logical_product: Too many modes in tiler"),
    (lambda: lc.logical_product(L(4, 2), L(3, 1)),
     "logical_product(4:2, 3:1): Shape Divisibility Condition: remaining shape 3 is not a multiple of 2"),
    (lambda: lc.zipped_divide(L((8, 6)), (_, 2)), "_ in a zipped/tiled/flat tiler"),
    (lambda: lc.tiled_product(L((8, 6)), (2, _)), "_ in a zipped/tiled/flat tiler"),
    (lambda: lc.blocked_product(L((2, 2)), (2, 2)), "the tiler of a blocked/raked product must be a Layout"),
    (lambda: lc.logical_divide("8:1", 2), "the first operand must be a Layout or a ComposedLayout"),
    # tile_to_shape and ordered layouts
    (lambda: lc.tile_to_shape(L(3, 1), (8, 8)), "tile_to_shape: block shape does not divide the target shape: (3,1)"),
    (lambda: lc.tile_to_shape(L((2, 2, 2)), (8, 8)), "Rank of layout must be <= rank of target shape"),
    (lambda: lc.make_ordered_layout((2, 3), (0, 1, 2)), "Need equal rank of shape and order"),
    # recast
    (lambda: lc.upcast(L(3, 6), 4), "upcast(3:6, 4): Divisibility condition"),
    (lambda: lc.downcast(L((4, 8), (2, 8)), 2), "Downcast requires adjacent elements"),
    (lambda: lc.downcast(L(4, -1), 2), "Downcast requires adjacent elements"),
    (lambda: lc.upcast(SW, 3), "N must be a power of two"),
    (lambda: lc.upcast(lc.ComposedLayout(SW, 3, L(8, 1)), 2), "Static safe_div requires t % u == 0"),
    # swizzles
    (lambda: lc.Swizzle(3, -1, 3), "MBase must be positive"),
    (lambda: lc.Swizzle(-1, 4, 3), "BBits must be positive"),
    (lambda: lc.Swizzle(3, 4, 2), "abs(SShift) must be more than BBits"),
    (lambda: lc.make_swizzle(0b11000, 0b1), "Number of bits in Y and Z don't match"),
    (lambda: lc.make_swizzle(0b101000, 0b101), "Something went wrong"),
    (lambda: lc.ComposedLayout(SW, 0, (8, 1)), "inner must be a Layout"),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_error(index):
    fn, message = ERRORS[index]
    with pytest.raises(lc.LayoutError) as info:
        fn()
    assert message in str(info.value)


def test_layout_error_is_a_value_error():
    assert issubclass(lc.LayoutError, ValueError)


def test_error_carries_op_and_operands():
    with pytest.raises(lc.LayoutError) as info:
        lc.composition(L((4, 5), (1, 10)), L(6, 1))
    assert info.value.op == "composition"
    assert info.value.operands == (L((4, 5), (1, 10)), L(6, 1))
