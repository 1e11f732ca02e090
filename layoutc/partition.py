"""CuTe's partitioning: how a layout is split into tiles and a tile over threads (CUTLASS 4.x semantics,
structurally identical).

- ``local_tile`` / ``inner_partition``: the tile at a coordinate (a CTA's tile); ``local_partition`` /
  ``outer_partition``: one element of every tile (a thread's share). They return ``(layout, offset)``, what CuTe's
  tensor versions do to a tensor's layout and pointer.
- ``make_layout_tv``: a thread–value (TV) layout, mapping ``(thread, value)`` to an index of a tile; kernels get TV
  layouts from these functions instead of writing them by hand. Composed with ``make_identity_layout`` of the tile
  it gives each value's coordinate.
"""
from .errors import LayoutError, within
from .int_tuple import crd2crd, dice_tuple, idx2crd_strided, is_tuple, product_each
from .layout import Layout, _, dice, make_layout, rank, size, slice_and_offset
from .algebra import composition, right_inverse
from .notation import to_str
from .swizzle import ComposedLayout
from .tiling import raked_product, zipped_divide
from .memo import pure


@pure
def make_layout_tv(thread_layout: Layout, value_layout: Layout = Layout(1)) -> tuple:
    """The (tiler, TV layout) of threads arranged by ``thread_layout`` each owning a ``value_layout`` block, as
    CuTe's ``make_layout_tv``: the (M, N) tile is ``raked_product(thread_layout, value_layout)`` (threads rake
    over value blocks), and the TV layout is its right inverse seen as (threads, values).

    ``make_layout_tv((32,8):(8,1), (1,8):(1,1))`` → tiler ``(32,64)``, TV ``((8,32),8):((256,1),32)``: thread t
    holds the 8 contiguous columns ``8·(t % 8) … 8·(t % 8) + 7`` of row ``t // 8`` (a 16-byte bf16 vector each).

    Pre: both are Layouts of the same rank (rank-2 in practice); ``raked_product(thread_layout, value_layout)``
    is a bijection onto ``[0, size)`` (compact, injective thread and value layouts).
    Post: ``size(tv) == size(thread_layout) * size(value_layout)``, ``shape(tv) == (size(thread_layout),
    size(value_layout))``, and ``tv`` is a bijection from ``[0, size(tv))`` onto the column-major indices of the
    ``tiler`` shape; ``tiler == product_each(shape(raked_product(thread_layout, value_layout)))``.
    """
    layout_mn = raked_product(thread_layout, value_layout)
    layout_tv = composition(right_inverse(layout_mn),
                            make_layout((size(thread_layout), size(value_layout))))
    return product_each(layout_mn.shape), layout_tv


# -- tiling and partitioning (CuTe's inner_partition, outer_partition, local_tile, local_partition) --------------
#
# CuTe defines these on tensors: the sliced tensor keeps the layout of what is selected, and its pointer moves by the
# offset of the selection. On a layout the same operation returns both parts, ``(layout, offset)``, exactly CuTe's
# ``slice_and_offset`` of the divided layout: the offset is an index for integer strides, a coordinate (arithmetic
# tuple) for basis strides, and 0 for a ComposedLayout, which keeps it inside, before its swizzle.

def _repeat_underscore(n: int):
    # CuTe's repeat<N>(_): a bare _ for N == 1, else a tuple of N
    return _ if n == 1 else (_,) * n


def _append_underscores(op: str, operands, coord: tuple, n: int) -> tuple:
    # CuTe's append<N>(coord, _): pad a tuple coordinate with _ up to rank N
    if len(coord) > n:
        raise LayoutError(op, operands, f"the coordinate {to_str(coord)} has rank {len(coord)} but the divided layout "
                          f"has only {n} such modes")
    return coord + (_,) * (n - len(coord))


def _divided(op: str, layout, tiler, coord):
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise LayoutError(op, (layout, tiler, coord), "the first operand must be a Layout or a ComposedLayout")
    return zipped_divide(layout, tiler)


@pure
def inner_partition(layout, tiler, coord) -> tuple:
    """CuTe's inner_partition: divide L by ``tiler`` and keep the tile at ``coord`` of the rest modes, as
    ``(tile layout, offset)``: the tile modes are ``zipped_divide(L, tiler)``'s first mode (flattened), the offset is
    where the tile starts. A tuple coordinate indexes the rest modes one by one (missing trailing modes stay ``_``,
    so they are kept); an int indexes them together, colexicographically.

    ``inner_partition((8,16):(1,8), (4,8), (1,1))`` → ``((4,8):(1,8), 68)``: rows 4…7, columns 8…15.
    ``inner_partition((4,8):(1@0,1@1), (2,4), (1,1))`` → ``((2,4):(1@0,1@1), (2,4))``: the tile's coordinates.
    ``inner_partition(Sw<3,4,3> o 0 o (8,64):(64,1), (8,16), (0,2))`` → ``(Sw<3,4,3> o 32 o (8,16):(64,1), 0)``.

    Pre: ``tiler`` is accepted by ``zipped_divide`` (a Layout, an int, or a tuple of Layouts, ints and nested tuples,
    as ``parse_tiler`` reads ``<...>``); a tuple ``coord`` has at most as many modes as the rest.
    Post: ``result == slice_and_offset((_, coord), zipped_divide(L, tiler))`` with the tile modes spliced; every
    value of the tile is ``offset + tile(c)`` (arithmetic sum for coordinates).
    """
    operands = (layout, tiler, coord)
    with within("inner_partition", operands):
        tiled = _divided("inner_partition", layout, tiler, coord)
        keep = _repeat_underscore(rank(tiled[0]))
        if is_tuple(coord):
            coord = _append_underscores("inner_partition", operands, coord, rank(tiled[1]))
        return slice_and_offset((keep, coord), tiled)


@pure
def outer_partition(layout, tiler, coord) -> tuple:
    """CuTe's outer_partition: divide L by ``tiler`` and keep, from every tile, the element at ``coord`` inside the
    tile, as ``(layout over the tiles, offset)``: what one thread of a ``tiler``-shaped thread block owns when the
    block is repeated over L. A tuple coordinate indexes the tile modes one by one (missing ones stay ``_``); an
    int indexes the tile colexicographically.

    ``outer_partition((8,16):(1,8), (4,8), (1,2))`` → ``((2,2):(4,64), 17)``: row 1 + 4i, column 2 + 8j.
    ``outer_partition((4,8):(1@0,1@1), (2,4), (1,3))`` → ``((2,2):(2@0,4@1), (1,3))``.

    Pre: as inner_partition, with ``coord`` against the tile modes.
    Post: ``result == slice_and_offset((coord, _), zipped_divide(L, tiler))`` with the rest modes spliced; over all
    coordinates of the tile the partitions cover L's image exactly once (for a tiler that divides L evenly).
    """
    operands = (layout, tiler, coord)
    with within("outer_partition", operands):
        tiled = _divided("outer_partition", layout, tiler, coord)
        keep = _repeat_underscore(rank(tiled[1]))
        if is_tuple(coord):
            coord = _append_underscores("outer_partition", operands, coord, rank(tiled[0]))
        return slice_and_offset((coord, keep), tiled)


def _project(op: str, operands, proj, x):
    # CuTe's dice(proj, x): keep x's modes paired with a non-_ element of the projection (CuTe's Step<_1, X, _1>)
    if isinstance(x, Layout):
        return dice(proj, x)
    if is_tuple(x) or (not is_tuple(proj) and proj is not _):
        return dice_tuple(proj, x)
    raise LayoutError(op, operands, f"the projection {to_str(proj)} cannot be applied to {to_str(x)}")


@pure
def local_tile(layout, tiler, coord, proj=None) -> tuple:
    """CuTe's local_tile (the CTA-level tile of a tensor): ``inner_partition(L, tiler, coord)``, as
    ``(tile layout, offset)``. With ``proj`` (CuTe's Step; ``_`` is CuTe's ``X``) the tiler and the coordinate are
    first diced by it, so one (M, N, K) tiler and one (m, n, k) coordinate serve A, B and C.

    ``local_tile((128,64):(64,1), (32,16), (1,2))`` → ``((32,16):(64,1), 2080)``.
    X
    tiles of the (M, K) block row 2, over all k (the ``_`` of the coordinate keeps the k modes).
    ``local_tile((128,128):(1@0,1@1), (32,64), (1,1))`` → ``((32,64):(1@0,1@1), (32,64))``: the tile's coordinates.

    Pre: as inner_partition; ``proj`` has the rank of the tiler and of the coordinate.
    Post: ``local_tile(L, T, c) == inner_partition(L, dice(proj, T), dice(proj, c))``.
    """
    if proj is not None:
        operands = (layout, tiler, coord, proj)
        with within("local_tile", operands):
            tiler = _project("local_tile", operands, proj, tiler)
            coord = _project("local_tile", operands, proj, coord)
    return inner_partition(layout, tiler, coord)


@pure
def local_partition(layout, thread_layout: Layout, index: int, proj=None) -> tuple:
    """CuTe's local_partition (a thread's share of a tile): thread ``index`` of ``thread_layout`` takes the elements
    at its coordinate in every ``thread_layout``-shaped block of L, as ``(layout over the blocks, offset)``:
    ``outer_partition(L, product_each(shape(thread_layout)), flat coordinate of index in thread_layout)``. The
    thread's coordinate inverts ``thread_layout`` (compact: ``idx2crd(index, shape, stride)``), so a row-major
    thread layout numbers threads along rows. ``proj`` dices the thread layout first (CuTe's Step).

    ``local_partition((16,64):(64,1), (2,16):(16,1), 17)`` → ``((8,4):(128,16), 65)``: thread 17 is at (1,1) of the
    2×16 threads, so it owns rows 1, 3, …, 15 and columns 1, 17, 33, 49.
    ``local_partition((8,8):(1@0,1@1), (4,2):(1,4), 5)`` → ``((2,4):(4@0,2@1), (1,1))``.

    Pre: ``thread_layout`` is a compact Layout (every thread index has one coordinate); its shape tiles L's modes
    as a tiler (the divides' conditions); ``0 <= index < size(thread_layout)``.
    Post: over all indices the partitions cover the image of L exactly once when ``thread_layout`` evenly divides
    L; ``result == outer_partition(L, product_each(shape(thr)), crd2crd(idx2crd(index, thr), shape(thr), 1s))``.
    """
    operands = (layout, thread_layout, index) if proj is None else (layout, thread_layout, index, proj)
    with within("local_partition", operands):
        if not isinstance(thread_layout, Layout):
            raise LayoutError("local_partition", operands, "the thread layout must be a Layout")
        if type(index) is not int or not 0 <= index < size(thread_layout):
            raise LayoutError("local_partition", operands, f"thread index {index!r} is outside the thread layout "
                              f"of size {size(thread_layout)}")
        if proj is not None:
            thread_layout = dice(proj, thread_layout)
        coord = flat_coord(thread_layout, index)
        return outer_partition(layout, product_each(thread_layout.shape), coord)


def flat_coord(layout: Layout, index: int):
    """CuTe's ``Layout::get_flat_coord``: the coordinate of index ``index`` in a compact layout, one int per top mode
    (each mode's coordinate linearised colexicographically); an int for a rank-1 layout:
    ``flat_coord((2,(4,2)):(8,(1,4)), 13)`` → (1,5) (its coordinate is (1,(1,1)), mode 1 linearised);
    ``flat_coord((2,16):(16,1), 17)`` → (1,1).

    Pre: a compact Layout with integer strides. Post: ``layout(result) == index`` for index < size (one int per top
    mode is a coordinate of the layout).
    """
    hier = idx2crd_strided(index, layout.shape, layout.stride)
    r = rank(layout)
    return crd2crd(hier, layout.shape, 1 if r == 1 else (1,) * r)
