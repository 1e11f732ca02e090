"""One element of a global tensor as a scalar of every thread, built from the tile IR's general ops (``gmem.tile`` of
one element, ``gmem.load`` with a TV layout whose every thread holds that element, ``frag.extract``): a varlen
batch's sequence offsets, a grouped GEMM's group of a row.

The lowering emits one bounds-guarded scalar load per thread (the fragment is a single register; ``frag.extract``
costs nothing); an element outside the tensor reads 0, ``gmem.load``'s default ``other``.
"""
from __future__ import annotations

import layoutc as lc

from ptxgen.ir.builder import frag


def load_element(b, tensor, coords, thread, threads: int, dtype: str = "i32", name: str = "element"):
    """``tensor[coords]`` (a gtensor of rank ``len(coords)``, coordinates i32 scalars) as a scalar of every thread of
    the ``threads`` that ``thread`` numbers (0 ≤ thread < threads; pass a constant 0 and threads = 1 where every
    thread reads it alike). The one-element window is read through the TV layout ``(threads,1):(0,0)``: each thread's
    one value is the window's element. Post: the scalar of type ``dtype`` (the tensor's element type) named ``name``,
    0 for an element outside the tensor."""
    coords = tuple(coords)
    window = b.gmem.tile(tensor, *coords, shape=(1,) * len(coords), name=f"{name}_at")
    value = b.gmem.load(window, thread, tv=lc.Layout((threads, 1), (0, 0)), type=frag(dtype, 1), name=f"{name}_frag")
    return b.frag.extract(value, index=0, name=name)
