"""Known results of CuTe C++ 4.x (documentation examples and compiled-CuTe facts), written out as cases.

Each case compares the printed form, which is injective on layouts: shape and stride trees must match exactly.
"""
import pytest

import layoutc as lc
from layoutc import Layout as L, _

SW = lc.Swizzle(3, 4, 3)
X = lc.ComposedLayout(SW, 0, L((8, 64), (64, 1)))
MN_SW128_16 = lc.ComposedLayout(SW, 0, L((64, 8), (1, 64)))
A12 = L((12, (4, 8)), (59, (13, 1)))
DOC2D = L((9, (4, 8)), (59, (13, 1)))
DOC2D_TILER = (L(3, 3), L((2, 4), (1, 8)))

CASES = {
    # coalesce and filter
    "coalesce doc": (lambda: lc.coalesce(L((2, (1, 6)), (1, (6, 2)))), "12:1"),
    "coalesce by-mode doc": (lambda: lc.coalesce(L((2, (1, 6)), (1, (6, 2))), (1, 1)), "(2,6):(1,2)"),
    "coalesce trailing 1": (lambda: lc.coalesce(L((2, 1), (1, 5))), "2:1"),
    "coalesce broadcast": (lambda: lc.coalesce(L((2, 3), (0, 0))), "6:0"),
    "coalesce 1:5": (lambda: lc.coalesce(L(1, 5)), "1:0"),
    "coalesce unwraps rank-1": (lambda: lc.coalesce(L((3,), (1,))), "3:1"),
    "coalesce profile wraps": (lambda: lc.coalesce(L(6, 1), (1,)), "(6):(1)"),
    "coalesce profile rank-1 tuple": (lambda: lc.coalesce(L(((2, 3),), ((1, 2),)), (1,)), "(6):(1)"),
    "coalesce profile leaves mode 1": (lambda: lc.coalesce(L((2, 3), (1, 2)), (1,)), "(2,3):(1,2)"),
    "coalesce nested profile": (lambda: lc.coalesce(L(((2, 3), (4, 5))), ((1, 1), 1)), "((2,3),20):((1,2),6)"),
    "coalesce profile size-1 mode": (lambda: lc.coalesce(L((2, 1, 3), (1, 7, 2)), (1, 1, 1)), "(2,1,3):(1,0,2)"),
    "coalesce negative": (lambda: lc.coalesce(L((2, 3), (-1, -2))), "6:-1"),
    "filter": (lambda: lc.filter(L((2, 1, 3), (0, 7, 2))), "3:2"),
    "filter by-mode": (lambda: lc.filter(L((2, 1, 3), (0, 7, 2)), (1, 1, 1)), "(1,1,3):(0,0,2)"),
    "filter all broadcast": (lambda: lc.filter(L((2, 3), (0, 0))), "1:0"),
    "filter 1 and 0": (lambda: lc.filter(L((1, 4), (3, 0))), "1:0"),
    # make_layout_like, nullspace, compact and ordered layouts
    "like keeps order": (lambda: lc.make_layout_like(L((2, 2, 2, 2), (0, 2, 4, 1))), "(2,2,2,2):(0,2,4,1)"),
    "like zero stride": (lambda: lc.make_layout_like(L((2, (3, 4)), (12, (0, 1)))), "(2,(3,4)):(4,(0,1))"),
    "like equal strides": (lambda: lc.make_layout_like(L((2, 3), (5, 5))), "(2,3):(1,1)"),
    "nullspace two": (lambda: lc.nullspace(L((2, 3, 4), (0, 1, 0))), "(2,4):(1,6)"),
    "nullspace one": (lambda: lc.nullspace(L((2, 3, 4), (0, 1, 3))), "2:1"),
    "nullspace none": (lambda: lc.nullspace(L((2, 3), (1, 2))), "1:0"),
    "ordered doc": (lambda: lc.make_ordered_layout((2, 2, 2, 2), (0, 2, 3, 1)), "(2,2,2,2):(1,4,8,2)"),
    "ordered ties": (lambda: lc.make_ordered_layout((2, 3, 4), (1, 1, 0)), "(2,3,4):(4,4,1)"),
    "ordered ties 2": (lambda: lc.make_ordered_layout((2, 3, 4), (1, 0, 1)), "(2,3,4):(3,1,3)"),
    "ordered nested": (lambda: lc.make_ordered_layout((2, (3, 4), 5), (1, (0, 2), 1)), "(2,(3,4),5):(3,(1,30),3)"),
    "ordered nested int order": (lambda: lc.make_ordered_layout((2, (3, 4), 5), (2, 0, 1)), "(2,(3,4),5):(60,(1,3),12)"),
    "LayoutLeft": (lambda: lc.make_layout((2, (3, 1), 5)), "(2,(3,1),5):(1,(2,0),6)"),
    "LayoutLeft doc": (lambda: lc.make_layout((2, (2, 2)), lc.LayoutLeft), "(2,(2,2)):(1,(2,4))"),
    "LayoutRight": (lambda: lc.make_layout((2, (3, 4), 5), lc.LayoutRight), "(2,(3,4),5):(60,(20,5),1)"),
    "LayoutRight size-1": (lambda: lc.make_layout((4, 1, 2), lc.LayoutRight), "(4,1,2):(2,0,1)"),
    "make_layout wraps one layout": (lambda: lc.make_layout(L(3, 1)), "(3):(1)"),
    "make_layout wraps rank-1": (lambda: lc.make_layout(L((3,), (1,))), "((3)):((1))"),
    "select": (lambda: lc.select(L((2, 3, 5, 7)), 2), "(5):(6)"),
    # composition
    "composition doc 1": (lambda: lc.composition(L((6, 2), (8, 2)), L((4, 3), (3, 1))), "((2,2),3):((24,2),8)"),
    "composition doc 2": (lambda: lc.composition(L(20, 2), L((5, 4), (4, 1))), "(5,4):(8,2)"),
    "composition doc 3": (lambda: lc.composition(L((10, 2), (16, 4)), L((5, 4), (1, 5))), "(5,(2,2)):(16,(80,4))"),
    "composition size-1 stride": (lambda: lc.composition(L(1, 4), L(1, 2)), "1:8"),
    "composition 1:2 o 2:64": (lambda: lc.composition(L(1, 2), L(2, 64)), "2:128"),
    "composition trailing broadcast": (lambda: lc.composition(L((4, 1), (1, 0)), L(8, 1)), "(4,2):(1,0)"),
    "composition negative lhs": (lambda: lc.composition(L((4, 5), (-1, 10)), L(2, 2)), "2:-2"),
    "composition past domain": (lambda: lc.composition(L((4, 5), (1, 10)), L(40, 1)), "(4,10):(1,10)"),
    "composition past integral": (lambda: lc.composition(L(4, 2), L(8, 1)), "8:2"),
    "composition shape-1 rhs mode": (lambda: lc.composition(L((4, 5), (1, 10)), L((2, 1), (1, 4))), "(2,1):(1,10)"),
    "composition shape-1 rhs mode 2": (lambda: lc.composition(L((4, 5), (1, 10)), L((2, 1), (1, 1))), "(2,1):(1,10)"),
    "composition 1:0 lhs": (lambda: lc.composition(L(1, 0), L(4, 1)), "4:0"),
    "composition tiler doc": (lambda: lc.composition(A12, (L(3, 4), L(8, 2))), "(3,(2,4)):(236,(26,1))"),
    "composition shape tiler": (lambda: lc.composition(A12, (3, 8)), "(3,(4,2)):(59,(13,1))"),
    "composition short tiler drops": (lambda: lc.composition(A12, (L(3, 4),)), "(3):(236)"),
    "composition underscore tiler": (lambda: lc.composition(A12, (_, L(8, 2))), "(12,(2,4)):(59,(26,1))"),
    "composition int tiler": (lambda: lc.composition(A12, 6), "6:59"),
    "composition nested tiler": (lambda: lc.composition(L((8, (4, 6))), (4, (2, 3))), "(4,(2,3)):(1,(8,32))"),
    # complement
    "complement 4:1": (lambda: lc.complement(L(4, 1), 24), "6:4"),
    "complement 6:4": (lambda: lc.complement(L(6, 4), 24), "4:1"),
    "complement full": (lambda: lc.complement(L((4, 6), (1, 4)), 24), "1:0"),
    "complement 4:2": (lambda: lc.complement(L(4, 2), 24), "(2,3):(1,8)"),
    "complement (2,4):(1,6)": (lambda: lc.complement(L((2, 4), (1, 6)), 24), "3:2"),
    "complement (2,2):(1,6)": (lambda: lc.complement(L((2, 2), (1, 6)), 24), "(3,2):(2,12)"),
    "complement default cotarget": (lambda: lc.complement(L(4, 2)), "2:1"),
    "complement unsorted": (lambda: lc.complement(L((3, 2), (4, 1)), 24), "(2,2):(2,12)"),
    "complement broadcast tuple cotarget": (lambda: lc.complement(L(4, 0), (2, 3)), "6:1"),
    "complement size-1": (lambda: lc.complement(L(1, 3), 4), "4:1"),
    "complement filtered cosize": (lambda: lc.complement(L((2, 3, 1), (0, 2, 5))), "2:1"),
    "complement inexact truncates": (lambda: lc.complement(L((2, 2), (1, 3)), 12), "2:6"),
    "complement tuple cotarget": (lambda: lc.complement(L(3, 1), (4, 6)), "12:3"),
    "complement int cotarget": (lambda: lc.complement(L(3, 1), 24), "8:3"),
    "complement tuple cotarget 2": (lambda: lc.complement(L(2, 1), (3, 5)), "10:2"),
    "complement int cotarget 2": (lambda: lc.complement(L(2, 1), 15), "8:2"),
    # inverses
    "right_inverse (4,2):(2,1)": (lambda: lc.right_inverse(L((4, 2), (2, 1))), "(2,4):(4,1)"),
    "right_inverse (2,3):(3,1)": (lambda: lc.right_inverse(L((2, 3), (3, 1))), "(3,2):(2,1)"),
    "right_inverse nested": (lambda: lc.right_inverse(L((4, (2, 2)), (2, (1, 8)))), "(2,4,2):(4,1,8)"),
    "right_inverse gap": (lambda: lc.right_inverse(L((2, 3), (1, 4))), "2:1"),
    "right_inverse broadcast": (lambda: lc.right_inverse(L((4, 2), (0, 1))), "2:4"),
    "right_inverse none": (lambda: lc.right_inverse(L(4, 2)), "1:0"),
    "right_inverse ties": (lambda: lc.right_inverse(L((2, 3, 5), (2, 2, 1))), "5:6"),
    "right_inverse underscore": (lambda: lc.right_inverse(_), "_"),
    "left_inverse (2,3):(1,4)": (lambda: lc.left_inverse(L((2, 3), (1, 4))), "(4,3):(1,2)"),
    "left_inverse 4:2": (lambda: lc.left_inverse(L(4, 2)), "(2,4):(0,1)"),
    "left_inverse (4,2):(2,1)": (lambda: lc.left_inverse(L((4, 2), (2, 1))), "(2,4):(4,1)"),
    "left_inverse broadcast": (lambda: lc.left_inverse(L((4, 2), (0, 1))), "2:4"),
    "left_inverse (2,3):(3,1)": (lambda: lc.left_inverse(L((2, 3), (3, 1))), "(3,2):(2,1)"),
    "left_inverse 1:0": (lambda: lc.left_inverse(L(1, 0)), "1:0"),
    "left_inverse unstable sort": (lambda: lc.left_inverse(L((3, 2, 2), (2, 2, 1))), "(2,3):(6,1)"),
    # max_common
    "mcl col col": (lambda: lc.max_common_layout(L((4, 8)), L((4, 8))), "32:1"),
    "mcl col row": (lambda: lc.max_common_layout(L((4, 8)), L((4, 8), (8, 1))), "1:0"),
    "mcl partial": (lambda: lc.max_common_layout(L((4, 8), (1, 8)), L((4, 8))), "4:1"),
    "mcl row row": (lambda: lc.max_common_layout(L((8, 4), (4, 1)), L((8, 4), (4, 1))), "(4,8):(8,1)"),
    # divides
    "logical_divide doc 1d": (lambda: lc.logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2)), "((2,2),(2,3)):((4,1),(2,8))"),
    "logical_divide doc 2d": (lambda: lc.logical_divide(DOC2D, DOC2D_TILER), "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"),
    "logical_divide keeps modes": (lambda: lc.logical_divide(L((8, 6, 2)), (4,)), "((4,2),6,2):((1,4),8,48)"),
    "logical_divide int": (lambda: lc.logical_divide(L((8, 6)), 4), "(4,12):(1,4)"),
    "logical_divide nested": (lambda: lc.logical_divide(L((8, (4, 6))), (4, (2, 3))), "((4,2),((2,2),(3,2))):((1,4),((8,16),(32,96)))"),
    "logical_divide past domain": (lambda: lc.logical_divide(L(6, 1), L(4, 1)), "(4,2):(1,4)"),
    "logical_divide tuple cotarget": (lambda: lc.logical_divide(L((3, 5)), L(2, 1)), "(2,8):(1,2)"),
    "logical_divide underscore": (lambda: lc.logical_divide(L((8, 6, 2)), (_, 2)), "(8,(2,3),2):(1,(8,16),48)"),
    # an int tiler is make_layout(n): 1 is 1:0 (CuTe 4.2 compiled; issue 16)
    "logical_divide int 1": (lambda: lc.logical_divide(L(7, 4), 1), "(1,7):(0,4)"),
    "logical_divide layout 1:1": (lambda: lc.logical_divide(L(7, 4), L(1, 1)), "(1,7):(4,4)"),
    "logical_divide tuple with 1": (lambda: lc.logical_divide(L((8, 6)), (1, 2)), "((1,8),(2,3)):((0,1),(8,16))"),
    "zipped_divide tuple with 1": (lambda: lc.zipped_divide(L((8, 6)), (1, 2)), "((1,2),(8,3)):((0,8),(1,16))"),
    "logical_product int 1": (lambda: lc.logical_product(L(7, 4), 1), "(7,1):(4,0)"),
    "composition int 1 stays 1:1": (lambda: lc.composition(L(7, 4), 1), "1:4"),
    "zipped_divide doc": (lambda: lc.zipped_divide(DOC2D, DOC2D_TILER), "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"),
    "tiled_divide doc": (lambda: lc.tiled_divide(DOC2D, DOC2D_TILER), "((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))"),
    "flat_divide doc": (lambda: lc.flat_divide(DOC2D, DOC2D_TILER), "(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))"),
    "zipped_divide nested": (lambda: lc.zipped_divide(L((8, (4, 6))), (4, (2, 3))), "((4,(2,3)),(2,(2,2))):((1,(8,32)),(4,(16,96)))"),
    "tiled_divide rank-1 tiler": (lambda: lc.tiled_divide(L((8, 6, 2)), (4,)), "((4),2,6,2):((1),4,8,48)"),
    "flat_divide rank-1 tiler": (lambda: lc.flat_divide(L((8, 6, 2)), (4,)), "((4),2,6,2):((1),4,8,48)"),
    "zipped_divide keeps": (lambda: lc.zipped_divide(L((8, 6, 2)), (4, 3)), "((4,3),(2,2,2)):((1,8),(4,24,48))"),
    "zipped_divide layout tiler": (lambda: lc.zipped_divide(L((8, 6)), L(4, 1)), "(4,12):(1,4)"),
    "tiled_divide layout tiler": (lambda: lc.tiled_divide(L((8, 6)), L(4, 1)), "(4,12):(1,4)"),
    "flat_divide layout tiler": (lambda: lc.flat_divide(L((8, 6)), L(4, 1)), "(4,12):(1,4)"),
    # products
    "logical_product doc": (lambda: lc.logical_product(L((2, 2), (4, 1)), L(6, 1)), "((2,2),(2,3)):((4,1),(2,8))"),
    "logical_product 2d tile": (lambda: lc.logical_product(L((2, 2), (4, 1)), L((4, 2), (2, 1))), "((2,2),(4,2)):((4,1),(8,2))"),
    "logical_product strided": (lambda: lc.logical_product(L(4, 1), L(3, 2)), "(4,3):(1,8)"),
    "logical_product int": (lambda: lc.logical_product(L(4, 1), 3), "(4,3):(1,4)"),
    "logical_product underscore": (lambda: lc.logical_product(L((2, 3)), (_, 2)), "(2,(3,2)):(1,(2,1))"),
    "logical_product by-mode doc": (lambda: lc.logical_product(L((2, 5), (5, 1)), (L(3, 5), L(4, 6))), "((2,3),(5,4)):((5,10),(1,30))"),
    "logical_product by-mode": (lambda: lc.logical_product(L((2, 5), (5, 1)), (L(3, 1), L(4, 1))), "((2,3),(5,4)):((5,1),(1,5))"),
    "zipped_product": (lambda: lc.zipped_product(L((2, 5), (5, 1)), (L(3, 1), L(4, 1))), "((2,5),(3,4)):((5,1),(1,5))"),
    "tiled_product": (lambda: lc.tiled_product(L((2, 5), (5, 1)), (L(3, 1), L(4, 1))), "((2,5),3,4):((5,1),1,5)"),
    "flat_product": (lambda: lc.flat_product(L((2, 5), (5, 1)), (L(3, 1), L(4, 1))), "(2,5,3,4):(5,1,1,5)"),
    "blocked_product doc": (lambda: lc.blocked_product(L((2, 5), (5, 1)), L((3, 4), (1, 3))), "((2,3),(5,4)):((5,10),(1,30))"),
    "raked_product doc": (lambda: lc.raked_product(L((2, 5), (5, 1)), L((3, 4), (1, 3))), "((3,2),(4,5)):((10,5),(30,1))"),
    "blocked_product nested": (lambda: lc.blocked_product(L(((2, 2), 3)), L((2, 2))), "(((2,2),2),(3,2)):(((1,2),12),(4,24))"),
    "raked_product nested": (lambda: lc.raked_product(L(((2, 2), 3)), L((2, 2))), "((2,(2,2)),(2,3)):((12,(1,2)),(24,4))"),
    "blocked_product integral": (lambda: lc.blocked_product(L(4, 1), L(3, 1)), "((4,3)):((1,4))"),
    "raked_product integral": (lambda: lc.raked_product(L(4, 1), L(3, 1)), "((3,4)):((4,1))"),
    "raked_product pads block": (lambda: lc.raked_product(L(4, 1), L((2, 3))), "((2,4),(3,1)):((4,1),(8,0))"),
    "blocked_product pads tiler": (lambda: lc.blocked_product(L((2, 3)), L(4, 1)), "((2,4),(3,1)):((1,6),(2,0))"),
    # tile_to_shape
    "tile_to_shape": (lambda: lc.tile_to_shape(L((2, 2), (1, 2)), (8, 8)), "((2,4),(2,4)):((1,4),(2,16))"),
    "tile_to_shape step": (lambda: lc.tile_to_shape(L((2, 2), (1, 2)), (8, 8), (2, 1)), "((2,4),(2,4)):((1,16),(2,4))"),
    "tile_to_shape 3d step": (lambda: lc.tile_to_shape(L((2, 2, 1)), (4, 6, 2), (2, 0, 1)), "((2,2),(2,3),(1,2)):((1,24),(2,4),(0,12))"),
    "tile_to_shape pads": (lambda: lc.tile_to_shape(L(4, 1), (8, 6)), "((4,2),(1,6)):((1,4),(0,8))"),
    "tile_to_shape nested target": (lambda: lc.tile_to_shape(L((2, 2), (1, 2)), ((2, 4), 8)), "((2,4),(2,4)):((1,4),(2,16))"),
    # recast
    "upcast 2": (lambda: lc.upcast(L((4, 8), (1, 4)), 2), "(2,8):(1,2)"),
    "upcast broadcast": (lambda: lc.upcast(L((4, 8), (2, 0)), 8), "(1,8):(1,0)"),
    "upcast 4": (lambda: lc.upcast(L((8, 8), (2, 16)), 4), "(4,8):(1,4)"),
    "upcast ceil": (lambda: lc.upcast(L((6,), (1,)), 4), "(2):(1)"),
    "upcast negative": (lambda: lc.upcast(L((4, 8), (-1, -8)), 2), "(2,8):(-1,-4)"),
    "downcast": (lambda: lc.downcast(L((4, 8), (1, 4)), 2), "(8,8):(1,8)"),
    "downcast broadcast": (lambda: lc.downcast(L(((4, 2), 8), ((1, 8), 0)), 2), "((8,2),8):((1,16),0)"),
    "recast 16->32": (lambda: lc.recast_layout(L((4, 8), (1, 4)), 16, 32), "(2,8):(1,2)"),
    "recast 32->16": (lambda: lc.recast_layout(L((4, 8), (1, 4)), 32, 16), "(8,8):(1,8)"),
    "recast 48->32": (lambda: lc.recast_layout(L((6, 4), (1, 6)), 48, 32), "(9,4):(1,9)"),
    # swizzles and composed layouts
    "layout o swizzle": (lambda: lc.composition(L((8, 128), (128, 1)), SW), "Sw<3,1,3> o 0 o (8,128):(128,1)"),
    "composed o layout": (lambda: lc.composition(X, L(16, 2)), "Sw<3,4,3> o 0 o (4,4):(128,1)"),
    "composed o int": (lambda: lc.composition(X, 16), "Sw<3,4,3> o 0 o (8,2):(64,1)"),
    "composed o tiler": (lambda: lc.composition(X, (L(4, 2), 8)), "Sw<3,4,3> o 0 o (4,8):(128,1)"),
    "composed divide": (lambda: lc.logical_divide(X, (4, 16)), "Sw<3,4,3> o 0 o ((4,2),(16,4)):((64,256),(1,16))"),
    "composed get": (lambda: X[1], "Sw<3,4,3> o 0 o 64:1"),
    "swizzle o swizzle": (lambda: lc.composition(lc.Swizzle(2, 4, 3), lc.Swizzle(1, 6, 3)), "Sw<3,4,3>"),
    "swizzle o layout": (lambda: lc.composition(SW, L((8, 64), (64, 1))), "Sw<3,4,3> o 0 o (8,64):(64,1)"),
    "identity swizzle o layout": (lambda: lc.composition(lc.Swizzle(0, 4, 3), L(8, 1)), "8:1"),
    "three-part keeps offset": (lambda: lc.composition(lc.Swizzle(0, 4, 3), 64, L(8, 1)), "Sw<0,4,3> o 64 o 8:1"),
    "upcast swizzle 32": (lambda: lc.upcast(SW, 32), "Sw<2,0,3>"),
    "upcast swizzle 64": (lambda: lc.upcast(SW, 64), "Sw<1,0,3>"),
    "upcast composed": (lambda: lc.upcast(lc.ComposedLayout(SW, 64, L((8, 64), (64, 1))), 2), "Sw<3,3,3> o 32 o (8,32):(32,1)"),
    "K SW128 tiled": (lambda: lc.tile_to_shape(X, (64, 128)), "Sw<3,4,3> o 0 o ((8,8),(64,2)):((64,512),(1,4096))"),
    "MN SW128 stages": (lambda: lc.tile_to_shape(MN_SW128_16, (128, 64, 3)), "Sw<3,4,3> o 0 o ((64,2),(8,8),(1,3)):((1,512),(64,1024),(0,8192))"),
    "K SW128 stages": (lambda: lc.tile_to_shape(X, (128, 64, 3)), "Sw<3,4,3> o 0 o ((8,16),(64,1),(1,3)):((64,512),(1,0),(0,8192))"),
    "MN SW128 stages by-mode coalesced": (lambda: lc.coalesce(lc.tile_to_shape(MN_SW128_16, (128, 64, 3)), (1, 1, 1)),
                                          "Sw<3,4,3> o 0 o ((64,2),(8,8),3):((1,512),(64,1024),8192)"),
    "K SW128 stages by-mode coalesced": (lambda: lc.coalesce(lc.tile_to_shape(X, (128, 64, 3)), (1, 1, 1)),
                                         "Sw<3,4,3> o 0 o (128,64,3):(64,1,8192)"),
    # slicing
    "slice nested": (lambda: L((2, (3, 4)), (1, (2, 6)))(_, (1, _)), "(2,4):(1,6)"),
    "slice rank-1": (lambda: L((2, (3, 4)), (1, (2, 6)))(1, _), "((3,4)):((2,6))"),
    "slice spliced": (lambda: L(((2, 3), (4, 5)))((_, 1), (2, _)), "(2,5):(1,24)"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_known_result(name):
    fn, expected = CASES[name]
    assert lc.to_str(fn()) == expected


@pytest.mark.parametrize("layout, coord, index", [
    (L((4, 2), (1, 10)), 9, 21),              # past the end walks along the last mode
    (L((3, (2, 3)), (3, (12, 1))), (1, 5), 17),
    (L((3, (2, 3)), (3, (12, 1))), 16, 17),
    (L((3, (2, 3)), (3, (12, 1))), (1, (1, 2)), 17),
    (L(8, 1), 5, 5),
])
def test_call(layout, coord, index):
    assert layout(coord) == index


def test_call_with_several_arguments_is_a_tuple_coordinate():
    layout = L((4, 2), (2, 1))
    assert layout(3, 1) == layout((3, 1)) == 7


def test_idx2crd():
    assert lc.idx2crd(16, (3, (2, 3))) == (1, (1, 2))
    assert lc.idx2crd(20, (3, (2, 3))) == (2, (0, 3))


def test_size_cosize_rank_depth():
    layout = L((4, (2, 3)), (1, (4, 8)))
    assert (lc.size(layout), lc.cosize(layout), lc.rank(layout), lc.depth(layout)) == (24, 24, 2, 2)
    assert lc.cosize(L((4, 2), (1, 0))) == 4
    assert lc.cosize(L((4, 2), (-1, 4))) == 8
    assert (lc.rank(L(8, 1)), lc.depth(L(8, 1))) == (1, 0)


def test_integral_and_rank1_layouts_differ():
    assert L(3, 236) != L((3,), (236,))
    assert lc.to_str(L((3,), (236,))) == "(3):(236)"
    assert lc.to_str(L(3, 236)) == "3:236"


def test_swizzle_values():
    assert SW(1000) == 920
    assert lc.Swizzle(0, 4, 3)(1000) == 1000
    # negative shift moves the high bits down into the low ones the other way round
    neg = lc.Swizzle(2, 0, -3)
    assert [neg(x) for x in range(32)] == [x ^ ((x & 0b11) << 3) for x in range(32)]


def test_make_swizzle():
    assert lc.make_swizzle(0b1110000000, 0b1110000) == SW


def test_compatible():
    assert lc.compatible(24, ((2, 3), 4))
    assert lc.compatible((4, 6), ((2, 2), 6))
    assert not lc.compatible((24,), 24)
    assert not lc.compatible(24, 32)
    assert lc.compatible(24, (24,))


def test_shape_div_and_ceil_div():
    assert lc.shape_div((4, 5, 6), 40) == (1, 1, 3)
    assert lc.shape_div(3, 6) == 1
    assert lc.shape_div(6, (2, 3)) == 1
    assert lc.ceil_div((7, 5, 3), (2,)) == (4, 5, 3)
    assert lc.ceil_div((3, 5), 2) == (2, 5)
    assert lc.ceil_div(7, (2, 3)) == 2
