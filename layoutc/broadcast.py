"""Broadcasting along a TV layout: the TV layout that reads a per-row or per-column vector so that every value of a
tile's fragment gets its row's (column's) entry.

A TV layout maps (thread, value) to a tile index (column-major over the tile's (M, N) modes). Composing it with the
projection ``(M,N):(1,0)`` (the row coordinate) or ``(M,N):(0,1)`` (the column coordinate) gives the layout
(thread, value) → row (column): a TV layout over the length-M (length-N) vector. A load through it gives each value of
the thread's fragment the vector's entry of its row (column), in the fragment's own value order — a bias or a norm's
weight broadcast over the rows of a tile, with no index arithmetic written by hand.
"""
from .algebra import composition
from .errors import LayoutError
from .int_tuple import product
from .layout import Layout, rank, size
from .memo import pure
from .notation import to_str


@pure
def broadcast_tv(tv: Layout, tile_shape, mode: int) -> Layout:
    """The TV layout ``(t, v) → coordinate `mode` of tile element tv(t, v)``: ``composition(P, tv)`` with ``P`` the
    projection of the rank-2 tile onto its mode ``mode`` (``(M,N):(1,0)`` for rows, ``(M,N):(0,1)`` for columns).

    ``broadcast_tv((4,2):(2,1), (2,4), 1)`` → ``(4,2):(1,0)``: thread t holds elements 2t, 2t+1 of the (2,4) tile,
    i.e. rows 0 and 1 of column t; reading the column vector through it gives both values entry t.

    Pre: ``tile_shape`` has rank 2, ``0 <= mode < 2``, ``tv`` is a rank-2 layout into the tile. Post: a layout of
    ``tv``'s shape whose image lies in ``[0, size of mode `mode`)`` and, for every (t, v), equals the mode-``mode``
    coordinate of ``tv(t, v)``; raises LayoutError when the composition is not admissible.
    """
    if not isinstance(tile_shape, tuple) or len(tile_shape) != 2:
        raise LayoutError("broadcast_tv", (tv, tile_shape, mode), "the tile must have rank 2 (rows, columns)")
    if mode not in (0, 1):
        raise LayoutError("broadcast_tv", (tv, tile_shape, mode), "mode must be 0 (rows) or 1 (columns)")
    if rank(tv) != 2:
        raise LayoutError("broadcast_tv", (tv, tile_shape, mode), "tv must have rank 2 (threads, values)")
    rows, cols = product(tile_shape[0]), product(tile_shape[1])
    projection = Layout((rows, cols), (1, 0) if mode == 0 else (0, 1))
    out = composition(projection, tv)  # distributes over tv's two modes: (P ∘ tv[0], P ∘ tv[1])
    threads, values = size(tv[0]), size(tv[1])
    ok = rank(out) == 2 and size(out[0]) == threads and size(out[1]) == values
    if ok:
        thread_part = [out[0](t) for t in range(threads)]
        value_part = [out[1](v) for v in range(values)]
        for t in range(threads):
            for v in range(values):
                index = tv((t, v))
                if thread_part[t] + value_part[v] != (index % rows if mode == 0 else index // rows):
                    ok = False
                    break
            if not ok:
                break
    if not ok:
        raise LayoutError("broadcast_tv", (tv, tile_shape, mode),
                          f"the projection {to_str(projection)} ∘ tv is no layout of tv's (threads, values) shape "
                          "giving each value's coordinate (the composition is not admissible)")
    return out
