"""layoutc: an exact, pure-Python CuTe layout algebra (CUTLASS 4.x semantics with static integers).

>>> import layoutc as lc
>>> str(lc.composition(lc.Layout((6, 2), (8, 2)), lc.Layout((4, 3), (3, 1))))
'((2,2),3):((24,2),8)'
"""
from .errors import LayoutError
from .int_tuple import (
    ceil_div, compatible, congruent, crd2idx, evenly_divides, idx2crd, product, product_each, shape_div,
    weakly_congruent,
)
from .layout import (
    Layout, LayoutLeft, LayoutRight, Underscore, _, append, coalesce, cosize, depth, dice, filter, flatten, group,
    make_layout, make_layout_like, make_ordered_layout, modes, nullspace, prepend, rank, select, shape, size,
    slice_layout, slice_offset, stride, take, zip_layouts,
)
from .swizzle import ComposedLayout, Swizzle, make_swizzle
from .algebra import (
    complement, composition, left_inverse, max_common_layout, max_common_vector, right_inverse,
)
from .tiling import (
    blocked_product, flat_divide, flat_product, logical_divide, logical_product, raked_product, tile_to_shape,
    tiled_divide, tiled_product, zipped_divide, zipped_product,
)
from .partition import make_layout_tv
from .broadcast import broadcast_tv
from .recast import downcast, recast_layout, upcast
from .notation import parse, parse_layout, parse_tiler, tiler_to_str, to_str
from .memo import clear_caches

__all__ = [name for name in dir() if not name.startswith("__")]
