"""Row L2 normalization (examples/l2norm.tile is ``build()`` printed, with comments).

One CTA of 512 threads per row; rows of N <= 16384 columns are read once into registers (x read once, y written
once), longer rows take two passes. See the .tile for the layouts.

Example (post-condition: ``y[r] = x[r] / sqrt(sum(x[r]**2) + eps)`` for every row, any N)::

    >>> import numpy as np
    >>> from ptxgen.interp import interpret
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> y = np.zeros_like(x)
    >>> interpret(build(), {"x": x, "y": y, "m": 2, "eps": 0.0})
    >>> bool(np.allclose(y, x / np.linalg.norm(x, axis=1, keepdims=True)))
    True
"""

from ptxgen.ir.builder import KernelBuilder, f32, frag, gtensor, i32, partition

THREADS = 512                 # 16 warps, one row per CTA
HALF = 8192                   # columns of one half tile: 512 threads x 16 values
WIDTH = 2 * HALF              # the register tile: rows up to this long are read once


def build():
    """The kernel of examples/l2norm.tile: ``y[r] = x[r] / sqrt(sum(x[r]**2) + eps)`` for each of the %m rows of
    the f32 (M, N) tensors %x, %y, one CTA of 512 threads per row, each thread 16 values of a half tile (TV
    ``(512,(4,4)):(4,(1,2048))``). Post: ``print_module(build())`` prints as examples/l2norm.tile."""
    # thread t: columns 4t + 2048j + i of a half, 4 16-byte vectors: (512,(4,4)):(4,(1,2048))
    tv = partition("copy", threads=(1, THREADS), vector=4, tile=(1, HALF))
    half = frag("f32", (4, 4))
    kb = KernelBuilder("l2norm", grid=("m", 1, 1), block=(THREADS, 1, 1),
                       x=gtensor("f32", 2), y=gtensor("f32", 2), m=i32, eps=f32)
    b = kb.b
    x, y = kb["x"], kb["y"]
    row = b.gpu.block_id(dim="x", name="row")
    thread = b.gpu.thread_id(dim="x", name="thread")
    n = b.gtensor.dim(x, mode=1, name="n")
    zero = b.const(0, i32, name="zero")
    c_half = b.const(HALF, i32, name="half")
    width = b.const(WIDTH, i32, name="width")
    fzero = b.const(0.0, f32, name="fzero")
    init = b.frag.splat(fzero, type=half, name="init")
    # carries the last tile loaded and the row's running sum of squares (one pass when N <= WIDTH)
    with b.scf.for_(zero, n, width, init, init, init, args=("col", "last_a", "last_b", "acc"),
                    names=("xa", "xb", "sums")) as loop:
        col, _last_a, _last_b, acc = loop
        col_b = b.arith.add(col, c_half, name="col_b")
        a_tile = b.gmem.tile(x, row, col, shape=(1, HALF), name="a_tile")
        b_tile = b.gmem.tile(x, row, col_b, shape=(1, HALF), name="b_tile")
        xa1 = b.gmem.load(a_tile, thread, tv=tv, type=half, name="xa1")
        xb1 = b.gmem.load(b_tile, thread, tv=tv, type=half, name="xb1")
        squares_a = b.frag.mul(xa1, xa1, name="squares_a")
        squares = b.frag.fma(xb1, xb1, squares_a, name="squares")
        # the row of the (1, 8192) tile spans the CTA: lanes by shuffles, warps through the op's shared scratch
        row_sums = b.frag.reduce(squares, thread, tv=tv, tile=(1, HALF), mode=1, kind="add", name="row_sums")
        nxt = b.frag.add(acc, row_sums, name="next")
        b.scf.yield_(xa1, xb1, nxt)
    xa, xb, sums = loop.results
    shifted = b.frag.add(sums, kb["eps"], name="shifted")
    scale = b.frag.rsqrt(shifted, name="scale")
    fits = b.arith.cmp(n, width, pred="le", name="fits")
    branch = b.scf.if_(fits)
    with branch.then:  # one pass: scale the registers
        ya_tile = b.gmem.tile(y, row, zero, shape=(1, HALF), name="ya_tile")
        yb_tile = b.gmem.tile(y, row, c_half, shape=(1, HALF), name="yb_tile")
        ya = b.frag.mul(xa, scale, name="ya")
        yb = b.frag.mul(xb, scale, name="yb")
        b.gmem.store(ya_tile, thread, ya, tv=tv)
        b.gmem.store(yb_tile, thread, yb, tv=tv)
        b.scf.yield_()
    with branch.otherwise:  # two passes: read the row again
        with b.scf.for_(zero, n, c_half, args=("col2",)) as (col2,):
            x_tile2 = b.gmem.tile(x, row, col2, shape=(1, HALF), name="x_tile2")
            y_tile2 = b.gmem.tile(y, row, col2, shape=(1, HALF), name="y_tile2")
            xs2 = b.gmem.load(x_tile2, thread, tv=tv, type=half, name="xs2")
            ys2 = b.frag.mul(xs2, scale, name="ys2")
            b.gmem.store(y_tile2, thread, ys2, tv=tv)
            b.scf.yield_()
        b.scf.yield_()
    return kb.module("ptxgen/kernels/l2norm")

