"""layoutc: an exact, pure-Python CuTe layout algebra (CUTLASS 4.x semantics with static integers).

>>> import layoutc as lc
>>> str(lc.composition(lc.Layout((6, 2), (8, 2)), lc.Layout((4, 3), (3, 1))))
'((2,2),3):((24,2),8)'
"""
from .errors import LayoutError
from .basis import ScaledBasis, arithmetic_sum, as_arithmetic_tuple, basis, make_basis_like
from .int_tuple import (
    ceil_div, compatible, congruent, crd2crd, crd2idx, dice_tuple, elem_leq, elem_less, evenly_divides, idx2crd,
    product, product_each, round_up, shape_div, slice_tuple, weakly_congruent,
)
from .layout import (
    Layout, LayoutLeft, LayoutRight, Underscore, _, append, coalesce, coshape, cosize, depth, dice, domain_offset,
    filter, flatten, group, make_identity_layout, make_layout, make_layout_like, make_ordered_layout, modes, nullspace,
    prepend, rank, select, shape, size, slice_and_offset, slice_layout, slice_offset, stride, take, zip_layouts,
)
from .swizzle import ComposedLayout, Swizzle, make_swizzle
from .algebra import (
    complement, composition, left_inverse, max_common_layout, max_common_vector, right_inverse,
)
from .tiling import (
    blocked_product, flat_divide, flat_product, logical_divide, logical_product, raked_product, tile_to_shape,
    tiled_divide, tiled_product, zipped_divide, zipped_product,
)
from .partition import (
    flat_coord, inner_partition, local_partition, local_tile, make_layout_tv, outer_partition,
)
from .broadcast import broadcast_tv
from .recast import downcast, max_alignment, recast_layout, upcast
from .notation import parse, parse_layout, parse_tiler, tiler_to_str, to_str
from .memo import clear_caches

__all__ = [name for name in dir() if not name.startswith("__")]
