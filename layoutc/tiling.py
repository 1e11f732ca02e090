"""Divides, products and tile_to_shape: CuTe's logical_/zipped_/tiled_/flat_ divide and product,
blocked_product, raked_product and tile_to_shape."""
from __future__ import annotations

from .algebra import complement, composition
from .errors import LayoutError, within
from .memo import pure
from .notation import to_str
from .int_tuple import ceil_div, evenly_divides, is_int, is_tuple, product_each
from .layout import (
    Layout, LayoutLeft, _, _validate_shape, append, coalesce, cosize, make_layout, make_ordered_layout, modes, rank,
    size, slice_layout, zip_layouts,
)
from .swizzle import ComposedLayout


def _rewrap(fn):
    """Ops on a ComposedLayout act on its inner layout and keep its outer function and offset; errors from the
    helper operations are reported as errors of this operation."""
    def wrapper(layout, tiler, *args, **kwargs):
        if isinstance(layout, ComposedLayout):
            return layout.with_inner(wrapper(layout.inner, tiler, *args, **kwargs))
        if not isinstance(layout, Layout):
            raise LayoutError(fn.__name__, (layout, tiler), "the first operand must be a Layout or a ComposedLayout")
        with within(fn.__name__, (layout, tiler)):
            return fn(layout, tiler, *args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _by_mode(op_name, layout: Layout, tiler, fn) -> Layout:
    """Apply ``fn`` mode by mode for a tuple tiler; modes beyond the tiler are kept (divides and products)."""
    ms = modes(layout)
    if len(tiler) == 0:
        raise LayoutError(op_name, (layout, tiler), "empty tiler")
    if len(tiler) > len(ms):
        raise LayoutError(op_name, (layout, tiler),
                          f"{op_name}: Too many modes in tiler: tiler rank {len(tiler)} > layout rank {len(ms)}")
    return make_layout(*[fn(m, t) for m, t in zip(ms, tiler)], *ms[len(tiler):])


def _as_tile_layout(op_name, layout, tiler):
    """The Layout a divide or product uses for one tiler element: CuTe's ``make_layout(n)`` for an int, so ``n:1``
    and ``1:0`` for n = 1 (a size-1 mode has stride 0 in a compact layout)."""
    if is_int(tiler):
        if tiler <= 0:
            raise LayoutError(op_name, (layout, tiler), f"tile size {tiler} is not positive")
        return Layout._make(tiler, 0 if tiler == 1 else 1)
    if isinstance(tiler, Layout):
        return tiler
    raise LayoutError(op_name, (layout, tiler), f"a tiler is a Layout, an int, _ or a tuple of those, not {tiler!r}")


@pure
@_rewrap
def logical_divide(layout: Layout, tiler) -> Layout:
    """Split L into (tile, rest): ``L ∘ (T, complement(T, shape(coalesce(L))))``.

    ``logical_divide((4,2,3):(2,1,8), 4:2)`` → ``((2,2),(2,3)):((4,1),(2,8))``; by mode with a tuple tiler, keeping
    modes past the tiler: ``(8,6,2) ⊘ (4,)`` → ``((4,2),6,2):((1,4),8,48)``. An int tiler n is ``make_layout(n)``, so
    ``1`` is ``1:0``: ``logical_divide(7:4, 1)`` → ``(1,7):(0,4)``.
    Post: mode 0 of the result is L∘T as a function.
    """
    if tiler is _:
        return layout
    if is_tuple(tiler):
        return _by_mode("logical_divide", layout, tiler, logical_divide)
    tile = _as_tile_layout("logical_divide", layout, tiler)
    return composition(layout, make_layout(tile, complement(tile, coalesce(layout).shape)))


@pure
@_rewrap
def logical_product(layout: Layout, tiler) -> Layout:
    """(L, complement(L, size(L)·cosize(T)) ∘ T): T repeats L.

    ``logical_product((2,2):(4,1), 6:1)`` → ``((2,2),(2,3)):((4,1),(2,8))``; an int tiler n means ``make_layout(n)``
    (``logical_product(4:1, 3)`` → ``(4,3):(1,4)``, ``logical_product(7:4, 1)`` → ``(7,1):(4,0)``); a tuple tiler works
    by mode and keeps the modes past it.
    Post: mode 0 is L; mode 1 enumerates disjoint translates of L's image.
    """
    if tiler is _:
        return layout
    if is_tuple(tiler):
        return _by_mode("logical_product", layout, tiler, logical_product)
    if isinstance(tiler, ComposedLayout):
        raise LayoutError("logical_product", (layout, tiler), "a ComposedLayout tiler is not supported; "
                          "take the product with its inner layout")
    tile = _as_tile_layout("logical_product", layout, tiler)
    return make_layout(layout, composition(complement(layout, size(layout) * cosize(tile)), tile))


def _zip2_by(op_name, layout: Layout, guide, operands) -> tuple:
    """Split a (tile, rest) layout along ``guide``'s tree into the tile modes and the rest modes."""
    if is_tuple(guide):
        ms = modes(layout)
        if len(ms) < len(guide) or not is_tuple(layout.shape):
            raise LayoutError(op_name, operands, "Mismatched ranks: the tiler has more modes than the layout")
        tiles, rests = [], []
        for m, g in zip(ms, guide):
            t, r = _zip2_by(op_name, m, g, operands)
            tiles.append(t)
            rests.append(r)
        return make_layout(*tiles), make_layout(*rests, *ms[len(guide):])
    if guide is _:
        raise LayoutError(op_name, operands, "_ in a zipped/tiled/flat tiler leaves the mode unsplit, so it has "
                          "no (tile, rest) pair; use logical_divide/logical_product for a partial tiler")
    if not is_tuple(layout.shape) or len(layout.shape) != 2:
        raise LayoutError(op_name, operands, "Mismatched ranks: expected a (tile, rest) mode")
    return layout[0], layout[1]


def _unzip(op_name, layout: Layout, tiler, result: Layout) -> Layout:
    tile, rest = _zip2_by(op_name, result, tiler, (layout, tiler))
    return make_layout(tile, rest)


def _tiled(z: Layout) -> Layout:
    # Z(_, repeat<rank(Z1)>(_)): repeat<1>(_) is a bare _, so a rank-1 rest stays one (tuple) mode
    r1 = rank(z[1])
    return slice_layout((_, _ if r1 == 1 else (_,) * r1), z)


def _flat(z: Layout) -> Layout:
    r0, r1 = rank(z[0]), rank(z[1])
    return slice_layout((_ if r0 == 1 else (_,) * r0, _ if r1 == 1 else (_,) * r1), z)


@pure
@_rewrap
def zipped_divide(layout: Layout, tiler) -> Layout:
    """logical_divide gathered as ((tiles...), (rests...)): ``(9,(4,8)):(59,(13,1)) ⊘ <3:3,(2,4):(1,8)>`` →
    ``((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))``. Post: same function as logical_divide."""
    return _unzip("zipped_divide", layout, tiler, logical_divide(layout, tiler))


@pure
@_rewrap
def tiled_divide(layout: Layout, tiler) -> Layout:
    """zipped_divide with the rest modes spliced: ``((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))`` for the doc case."""
    return _tiled(zipped_divide(layout, tiler))


@pure
@_rewrap
def flat_divide(layout: Layout, tiler) -> Layout:
    """zipped_divide with tile and rest modes spliced: ``(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))`` for the doc case."""
    return _flat(zipped_divide(layout, tiler))


@pure
@_rewrap
def zipped_product(layout: Layout, tiler) -> Layout:
    """logical_product gathered as ((blocks...), (repeats...)): ``(2,5):(5,1) ⊗ <3:1,4:1>`` →
    ``((2,5),(3,4)):((5,1),(1,5))``."""
    return _unzip("zipped_product", layout, tiler, logical_product(layout, tiler))


@pure
@_rewrap
def tiled_product(layout: Layout, tiler) -> Layout:
    """zipped_product with repeat modes spliced: ``((2,5),3,4):((5,1),1,5)`` for ``(2,5):(5,1) ⊗ <3:1,4:1>``."""
    return _tiled(zipped_product(layout, tiler))


@pure
@_rewrap
def flat_product(layout: Layout, tiler) -> Layout:
    """zipped_product fully spliced: ``(2,5,3,4):(5,1,1,5)`` for ``(2,5):(5,1) ⊗ <3:1,4:1>``."""
    return _flat(zipped_product(layout, tiler))


def _padded_product(op_name, block, tiler):
    if not isinstance(tiler, Layout):
        raise LayoutError(op_name, (block, tiler), "the tiler of a blocked/raked product must be a Layout")
    r = max(rank(block), rank(tiler))
    a = append(block, rank_to=r)
    b = append(tiler, rank_to=r)
    product_layout = logical_product(a, b)
    return product_layout[0], product_layout[1]


@pure
@_rewrap
def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """Mode i is (block_i, repeat_i): ``blocked_product((2,5):(5,1), (3,4):(1,3))`` →
    ``((2,3),(5,4)):((5,10),(1,30))``. Ranks are padded with ``1:0`` modes to the larger one.
    Pre: the repeats zip with the padded block ("Mismatched Ranks" otherwise, as CuTe's zip): a rank-1 tuple block
    with an integral tiler whose repeats come out integral, e.g. ``blocked_product((4):(1), 3:1)``, is refused.
    Post: restricted to the first repeat, the result is the block."""
    p0, p1 = _padded_product("blocked_product", block, tiler)
    return zip_layouts(p0, p1)


@pure
@_rewrap
def raked_product(block: Layout, tiler: Layout) -> Layout:
    """Mode i is (repeat_i, block_i): ``raked_product((2,5):(5,1), (3,4):(1,3))`` → ``((3,2),(4,5)):((10,5),(30,1))``."""
    p0, p1 = _padded_product("raked_product", block, tiler)
    return zip_layouts(p1, p0)


@pure
@_rewrap
def tile_to_shape(block: Layout, target, order=LayoutLeft) -> Layout:
    """Repeat ``block`` to fill ``target`` in ``order``: ``tile_to_shape((2,2):(1,2), (8,8))`` →
    ``((2,4),(2,4)):((1,4),(2,16))``; ``order`` is LayoutLeft, LayoutRight or a tuple (CuTe's Step).
    Pre: rank(block) ≤ rank(target); each block mode's size divides the target's.
    Post: ``product_each(shape(result)) == product_each(target)``; on the first tile the result equals the block.
    """
    _validate_shape(target, "tile_to_shape", (block, target))
    r_target = len(target) if is_tuple(target) else 1
    if rank(block) > r_target:
        raise LayoutError("tile_to_shape", (block, target),
                          f"Rank of layout must be <= rank of target shape: {rank(block)} > {r_target}")
    padded = append(block, rank_to=r_target)
    block_shape = product_each(padded.shape)
    target_shape = product_each(target)
    if not evenly_divides(target_shape, block_shape):
        raise LayoutError("tile_to_shape", (block, target),
                          f"tile_to_shape: block shape does not divide the target shape: {to_str(block_shape)} "
                          f"does not evenly divide {to_str(target_shape)}")
    repeats = ceil_div(target_shape, block_shape)
    return blocked_product(padded, make_ordered_layout(repeats, order))
