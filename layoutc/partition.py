"""CuTe's partitioning: how a tile is split over threads (CUTLASS 4.x semantics, structurally identical).

A thread–value (TV) layout maps ``(thread, value)`` to an index of a tile; kernels get TV layouts from these
functions instead of writing them by hand.
"""
from .int_tuple import product_each
from .layout import Layout, make_layout, size
from .algebra import composition, right_inverse
from .tiling import raked_product
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
