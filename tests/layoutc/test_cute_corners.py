"""The last corners where layoutc must be structurally identical to CuTe C++ (issue 16, item 8).

Every expected value below was printed by CuTe 4.2 itself: host code compiled with g++ against the headers of the
``nvidia-cutlass`` wheel (``Int<N>`` everywhere; CuTe's ``_N`` markers dropped). Where CuTe does not compile an
input (a ``static_assert``, or a missing ``tuple_size``), layoutc raises LayoutError naming CuTe's condition.
"""
import pytest

import layoutc as lc
from layoutc import ComposedLayout, Layout, Swizzle, _

P = lc.parse

# ---------------------------------------------------------------------------------------------------------------
# 1. An int in a tiler is make_layout(n): 1 is 1:0. (composition alone reads an int N as N:1, also for N = 1.)

TILER_ONE = [
    ("logical_divide", "7:4", 1, "(1,7):(0,4)"),
    ("logical_divide", "7:4", "1:1", "(1,7):(4,4)"),  # an explicit layout 1:1 keeps its stride
    ("logical_divide", "(8,6):(1,8)", (1, 2), "((1,8),(2,3)):((0,1),(8,16))"),
    ("logical_divide", "(8,6):(1,8)", (2, 1), "((2,4),(1,6)):((1,2),(0,8))"),
    ("logical_divide", "(8,(4,6)):(1,(8,32))", (1, (2, 1)), "((1,8),((2,2),(1,6))):((0,1),((8,16),(0,32)))"),
    ("logical_divide", "((2,4),3):((1,2),8)", 1, "(1,24):(0,1)"),
    ("logical_divide", "(4,1):(1,0)", (1, 1), "((1,4),(1,1)):((0,1),(0,0))"),
    ("zipped_divide", "(8,6):(1,8)", (1, 2), "((1,2),(8,3)):((0,8),(1,16))"),
    ("tiled_divide", "(8,6):(1,8)", (1, 2), "((1,2),8,3):((0,8),1,16)"),
    ("flat_divide", "(8,6):(1,8)", (1, 2), "(1,2,8,3):(0,8,1,16)"),
    ("zipped_divide", "7:4", 1, "(1,7):(0,4)"),
    ("tiled_divide", "7:4", 1, "(1,7):(0,4)"),
    ("flat_divide", "7:4", 1, "(1,7):(0,4)"),
    ("zipped_divide", "(8,(4,6)):(1,(8,32))", (1, (2, 1)), "((1,(2,1)),(8,(2,6))):((0,(8,0)),(1,(16,32)))"),
    ("tiled_divide", "(8,(4,6)):(1,(8,32))", (1, (2, 1)), "((1,(2,1)),8,(2,6)):((0,(8,0)),1,(16,32))"),
    ("flat_divide", "(8,(4,6)):(1,(8,32))", (1, (2, 1)), "(1,(2,1),8,(2,6)):(0,(8,0),1,(16,32))"),
    ("logical_product", "7:4", 1, "(7,1):(4,0)"),
    ("logical_product", "(2,5):(5,1)", (1, 3), "((2,1),(5,3)):((5,0),(1,5))"),
    ("logical_product", "(2,5):(5,1)", (3, 1), "((2,3),(5,1)):((5,1),(1,0))"),
    ("zipped_product", "(2,5):(5,1)", (1, 3), "((2,5),(1,3)):((5,1),(0,5))"),
    ("tiled_product", "(2,5):(5,1)", (1, 3), "((2,5),1,3):((5,1),0,5)"),
    ("flat_product", "(2,5):(5,1)", (1, 3), "(2,5,1,3):(5,1,0,5)"),
    ("zipped_product", "7:4", 1, "(7,1):(4,0)"),
    ("tiled_product", "7:4", 1, "(7,1):(4,0)"),
    ("flat_product", "7:4", 1, "(7,1):(4,0)"),
    ("composition", "7:4", 1, "1:4"),
    ("composition", "(8,6):(1,8)", (1, 2), "(1,2):(1,8)"),
    ("composition", "(4,5):(1,10)", 1, "1:10"),
    ("logical_divide", "Sw<3,4,3> o 0 o (8,64):(64,1)", (1, 16), "Sw<3,4,3> o 0 o ((1,8),(16,4)):((0,64),(1,16))"),
    ("logical_product", "Sw<3,4,3> o 0 o (8,64):(64,1)", (1, 2), "Sw<3,4,3> o 0 o ((8,1),(64,2)):((64,0),(1,64))"),
]


@pytest.mark.parametrize("op, layout, tiler, expected", TILER_ONE, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in TILER_ONE])
def test_int_tiler_is_make_layout(op, layout, tiler, expected):
    tiler = P(tiler) if isinstance(tiler, str) else tiler
    assert str(getattr(lc, op)(P(layout), tiler)) == expected


def test_default_strides_match_make_layout():
    # CuTe make_layout(shape): a size-1 leaf gets stride 0 wherever it is
    assert str(Layout((4, 1))) == "(4,1):(1,0)"
    assert str(Layout((1, 4))) == "(1,4):(0,1)"
    assert str(Layout((1, (1, 1)))) == "(1,(1,1)):(0,(0,0))"
    assert str(Layout(1)) == "1:0"
    assert str(lc.make_layout(1)) == "1:0"


# ---------------------------------------------------------------------------------------------------------------
# 2. dice with an int coordinate keeps the layout unchanged


def test_dice_int_coordinate_is_the_layout():
    L = P("(4,2):(1,4)")
    assert lc.dice(3, L) is L
    assert lc.dice(0, P("8:2")) == P("8:2")


def test_dice_tuple_coordinates():
    assert str(lc.dice((1, (_, 2)), P("(4,(2,3)):(1,(4,8))"))) == "(4,3):(1,8)"
    assert str(lc.dice((1, _), P("(4,2):(1,4)"))) == "(4):(1)"
    assert str(lc.dice((_, 0), P("((2,2),3):((1,2),4)"))) == "(3):(4)"


def test_dice_keeping_nothing_is_refused():
    # CuTe returns the empty layout ():(), which layoutc does not have
    with pytest.raises(lc.LayoutError, match=r"dice\(_, \(4,2\):\(1,4\)\): the coordinate keeps no mode"):
        lc.dice(_, P("(4,2):(1,4)"))


# ---------------------------------------------------------------------------------------------------------------
# 3. Identity swizzles: kept by the constructor (CuTe's make_composed_layout), dropped wherever CuTe rebuilds with
#    composition(Sw<0,M,S>, 0, L)

IDENTITY = "Sw<0,4,3> o 0 o (8,64):(64,1)"

IDENTITY_SWIZZLE = [
    ("make_composed_layout", lambda: ComposedLayout(Swizzle(0, 4, 3), 0, P("(8,64):(64,1)")), IDENTITY),
    ("parse", lambda: P(IDENTITY), IDENTITY),
    ("composition(Sw, L)", lambda: lc.composition(Swizzle(0, 4, 3), P("(8,64):(64,1)")), "(8,64):(64,1)"),
    ("composition(Sw, 0, L)", lambda: lc.composition(Swizzle(0, 4, 3), 0, P("8:1")), "8:1"),
    ("composition(Sw, 64, L) keeps", lambda: lc.composition(Swizzle(0, 4, 3), 64, P("8:1")), "Sw<0,4,3> o 64 o 8:1"),
    ("composition(L, Sw) onto zeros", lambda: lc.composition(P("(8,128):(0,0)"), Swizzle(3, 4, 3)), "(8,128):(0,0)"),
    ("composition(L, Sw<0> o 0 o B)", lambda: lc.composition(P("(8,64):(64,1)"), P("Sw<0,4,3> o 0 o 32:2")),
     "(4,8):(128,1)"),
    ("get", lambda: P(IDENTITY)[1], "64:1"),
    ("get at offset 64", lambda: P("Sw<0,4,3> o 64 o (8,64):(64,1)")[1], "Sw<0,4,3> o 64 o 64:1"),
    ("flatten", lambda: lc.flatten(P("Sw<0,4,3> o 0 o (8,(2,4)):(1,(8,16))")), "(8,2,4):(1,8,16)"),
    ("take", lambda: lc.take(P("Sw<0,4,3> o 0 o (8,(2,4)):(1,(8,16))"), 0, 1), "(8):(1)"),
    ("coalesce", lambda: lc.coalesce(P(IDENTITY)), "(8,64):(64,1)"),
    ("composition with a tiler", lambda: lc.composition(P(IDENTITY), (4, 8)), "(4,8):(64,1)"),
    ("composition with a tiler, offset 8", lambda: lc.composition(P("Sw<0,4,3> o 8 o (8,64):(64,1)"), (4, 8)),
     "Sw<0,4,3> o 8 o (4,8):(64,1)"),
    ("logical_divide", lambda: lc.logical_divide(P(IDENTITY), (4, 16)), "((4,2),(16,4)):((64,256),(1,16))"),
    ("zipped_divide", lambda: lc.zipped_divide(P("Sw<0,2,3> o 0 o (8,8):(1,8)"), (1, 4)),
     "((1,4),(8,2)):((0,8),(1,32))"),
    ("raked_product", lambda: lc.raked_product(P("Sw<0,2,3> o 0 o (2,2):(1,2)"), P("(2,2):(1,2)")),
     "((2,2),(2,2)):((4,1),(8,2))"),
    ("tile_to_shape", lambda: lc.tile_to_shape(P("Sw<0,4,3> o 0 o (8,8):(8,1)"), (64, 16)),
     "((8,8),(8,2)):((8,64),(1,512))"),
    ("slice with _ only", lambda: P(IDENTITY)(_, _), "(8,64):(64,1)"),
    # a fixed coordinate at index 0: CuTe's decayed slice is (8):(64) with offset 0, and so is layoutc's
    ("slice at offset 0", lambda: P(IDENTITY)(_, 0), "(8):(64)"),
    # elsewhere layoutc folds the offset in (spec §6.1); CuTe decays to (8):(64) and returns the offset 3 apart
    ("slice folds a nonzero offset", lambda: P(IDENTITY)(_, 3), "Sw<0,4,3> o 3 o (8):(64)"),
    # CuTe's upcast/downcast of a composed layout rebuild it as is: an identity swizzle stays
    ("upcast keeps", lambda: lc.upcast(P(IDENTITY), 2), "Sw<0,3,3> o 0 o (8,32):(32,1)"),
    ("downcast keeps", lambda: lc.downcast(P(IDENTITY), 2), "Sw<0,5,3> o 0 o (8,128):(128,1)"),
    ("upcast to an identity swizzle keeps", lambda: lc.upcast(P("Sw<1,0,3> o 0 o (8,64):(64,1)"), 2),
     "Sw<0,0,3> o 0 o (8,32):(32,1)"),
]


@pytest.mark.parametrize("name, fn, expected", IDENTITY_SWIZZLE, ids=[c[0] for c in IDENTITY_SWIZZLE])
def test_identity_swizzle(name, fn, expected):
    assert str(fn()) == expected


def test_identity_swizzle_results_are_plain_layouts():
    X = P(IDENTITY)
    assert type(X) is ComposedLayout and type(X[0]) is Layout and type(lc.logical_divide(X, 4)) is Layout
    assert type(X.with_inner(X.inner, 8)) is ComposedLayout


def test_nonidentity_swizzle_slice_is_unchanged():
    # a real swizzle keeps layoutc's documented slice (offset folded in): spec §6.1
    assert str(P("Sw<3,4,3> o 0 o (8,64):(64,1)")(_, 3)) == "Sw<3,4,3> o 3 o (8):(64)"


# ---------------------------------------------------------------------------------------------------------------
# 4. What CuTe does not compile, layoutc refuses with CuTe's condition

REFUSED = [
    # zip(P0, P1) needs tuple_size of both: a rank-1 tuple block with integral repeats has none
    (lambda: lc.blocked_product(P("(4):(1)"), P("3:1")),
     "blocked_product((4):(1), 3:1): Mismatched Ranks: 3:4 is integral but the first layout is a rank-1 tuple "
     "[in zip((4):(1), 3:4)]"),
    (lambda: lc.blocked_product(P("(2):(2)"), P("4:1")),
     "blocked_product((2):(2), 4:1): Mismatched Ranks: (2,2):(1,4) has rank 2 but the first layout has rank 1 "
     "[in zip((2):(2), (2,2):(1,4))]"),
    (lambda: lc.zip_layouts(P("(2,3):(1,2)"), P("4:1")),
     "zip((2,3):(1,2), 4:1): Mismatched Ranks: 4:1 is integral but the first layout is a rank-2 tuple"),
    (lambda: lc.append(P("(2,3):(1,2)"), rank_to=1),
     "append((2,3):(1,2), 1): append<N> needs N >= rank: N = 1 but the rank is 2 "
     "(CuTe: static_assert(N > tuple_size<T>::value))"),
    (lambda: lc.group(P("(2,3,5):(1,2,6)"), 2, 1),
     "group((2,3,5):(1,2,6), 2, 1): need 0 <= begin <= end <= rank 3 (CuTe: static_assert(B <= E))"),
    (lambda: lc.crd2idx(5, (4, 2), (1,)),
     "crd2idx(5, (4,2), (1)): Mismatched Ranks: shape and stride ranks differ"),
    (lambda: lc.crd2idx(5, (4, 2), 1),
     "crd2idx(5, (4,2), 1): Mismatched Ranks: shape and stride ranks differ"),
    # CuTe divides by zero at run time (SIGFPE) and builds size-0 modes for a zero target; layoutc refuses them
    (lambda: lc.ceil_div(4, 0), "ceil_div(4, 0): division by zero: the divisor is 0"),
    (lambda: lc.shape_div((4, 6), 0), "shape_div(4, 0): division by zero: the divisor is 0"),
    (lambda: lc.complement(P("4:1"), 0),
     "complement(4:1, 0): shape 0 is not positive: every shape leaf must be >= 1"),
    (lambda: lc.tile_to_shape(P("2:1"), (8, 0)),
     "tile_to_shape(2:1, (8,0)): shape 0 is not positive: every shape leaf must be >= 1"),
]


@pytest.mark.parametrize("fn, message", REFUSED, ids=[m.split("(")[0] + str(i) for i, (_f, m) in enumerate(REFUSED)])
def test_refused_as_cute_refuses(fn, message):
    with pytest.raises(lc.LayoutError) as info:
        fn()
    assert str(info.value) == message


def test_accepted_as_cute_accepts():
    # raked_product zips (repeats, block): an integral first operand wraps, as CuTe's zip does
    assert str(lc.raked_product(P("(4):(1)"), P("3:1"))) == "((3,(4))):((4,(1)))"
    assert str(lc.blocked_product(P("4:1"), P("(3):(1)"))) == "((4,(3))):((1,(4)))"
    # group<B,B> groups nothing; on an integral layout it still makes the rank-1 tuple
    assert str(lc.group(P("(2,3,5):(1,2,6)"), 1, 1)) == "(2,3,5):(1,2,6)"
    assert str(lc.group(P("(2,3,5):(1,2,6)"), 3, 3)) == "(2,3,5):(1,2,6)"
    assert str(lc.group(P("8:1"), 1, 1)) == "(8):(1)"
    assert str(lc.group(P("8:1"), 0, 1)) == "((8)):((1))"
    assert str(lc.append(P("8:1"), rank_to=1)) == "8:1"
    assert str(lc.append(P("8:1"), rank_to=2)) == "(8,1):(1,0)"
    # a Layout cotarget stands for its shape
    assert str(lc.complement(P("4:2"), P("(4,6):(1,4)"))) == "(2,3):(1,8)"


def test_negative_coordinates_split_as_cpp():
    # CuTe divides with C++ semantics (truncation): -5 in (4,2) is (-1,-1)
    assert lc.crd2idx(-1, (4, 2), (1, 10)) == -1
    assert lc.crd2idx(-5, (4, 2), (1, 10)) == -11
    assert lc.idx2crd(-5, (4, 2)) == (-1, -1)
    assert lc.idx2crd(-1, (4, (2, 3))) == (-1, (0, 0))
