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
import layoutc as lc

from ptxgen.ir.builder import KernelBuilder, f32, frag, gtensor, i32, partition, smem

THREADS = 512                 # 16 warps, one row per CTA
HALF = 8192                   # columns of one half tile: 512 threads x 16 values
WIDTH = 2 * HALF              # the register tile: rows up to this long are read once
WARP_TV = "((32,16),(4,4)):((256,1),(16,64))"  # the same values, warp w = row w of an abstract (16, 512) tile
PARTS_TV = "(512,(4,4)):(0,(1,4))"             # every thread reads all 16 warp totals
OWN_TV = "(512,(4,4)):(1,(512,2048))"          # thread t = row t of an abstract (512, 16) tile: a per-thread sum
LEAD_TV = "((32,16),(4,4)):((0,1),(0,0))"      # warp w's (equal) values all go to %parts[w]


def build():
    """The kernel of examples/l2norm.tile: ``y[r] = x[r] / sqrt(sum(x[r]**2) + eps)`` for each of the %m rows of
    the f32 (M, N) tensors %x, %y, one CTA of 512 threads per row, each thread 16 values of a half tile (TV
    ``(512,(4,4)):(4,(1,2048))``). Post: ``print_module(build())`` prints as examples/l2norm.tile."""
    # thread t: columns 4t + 2048j + i of a half, 4 16-byte vectors: (512,(4,4)):(4,(1,2048))
    tv = partition("copy", threads=(1, THREADS), vector=4, tile=(1, HALF))
    warp_tv = lc.parse(WARP_TV)
    half = frag("f32", (4, 4))
    kb = KernelBuilder("l2norm", grid=("m", 1, 1), block=(THREADS, 1, 1),
                       x=gtensor("f32", 2), y=gtensor("f32", 2), m=i32, eps=f32)
    b = kb.b
    x, y = kb["x"], kb["y"]
    parts = b.smem.alloc(type=smem("f32", "16:1"), name="parts")
    row = b.gpu.block_id(dim="x", name="row")
    thread = b.gpu.thread_id(dim="x", name="thread")
    lane = b.gpu.lane_id(name="lane")
    n = b.gtensor.dim(x, mode=1, name="n")
    zero = b.const(0, i32, name="zero")
    c_half = b.const(HALF, i32, name="half")
    width = b.const(WIDTH, i32, name="width")
    fzero = b.const(0.0, f32, name="fzero")
    init = b.frag.splat(fzero, type=half, name="init")
    # carries the last tile loaded and the warp's running sum of squares (one pass when N <= WIDTH)
    with b.scf.for_(zero, n, width, init, init, init, args=("col", "last_a", "last_b", "acc"),
                    names=("xa", "xb", "warp_sums")) as loop:
        col, _last_a, _last_b, acc = loop
        col_b = b.arith.add(col, c_half, name="col_b")
        a_tile = b.gmem.tile(x, row, col, shape=(1, HALF), name="a_tile")
        b_tile = b.gmem.tile(x, row, col_b, shape=(1, HALF), name="b_tile")
        xa1 = b.gmem.load(a_tile, thread, tv=tv, type=half, name="xa1")
        xb1 = b.gmem.load(b_tile, thread, tv=tv, type=half, name="xb1")
        squares_a = b.frag.mul(xa1, xa1, name="squares_a")
        sums_a = b.frag.reduce(squares_a, thread, tv=warp_tv, tile=(16, 512), mode=1, kind="add", type=half,
                               name="sums_a")
        squares_b = b.frag.mul(xb1, xb1, name="squares_b")
        sums_b = b.frag.reduce(squares_b, thread, tv=warp_tv, tile=(16, 512), mode=1, kind="add", type=half,
                               name="sums_b")
        sums_ab = b.frag.add(sums_a, sums_b, name="sums_ab")
        nxt = b.frag.add(acc, sums_ab, name="next")
        b.scf.yield_(xa1, xb1, nxt)
    xa, xb, warp_sums = loop.results
    # the CTA's total: lane 0 of each warp publishes the warp's sum, every thread adds the 16 of them
    is_lead = b.arith.cmp(lane, zero, pred="eq", name="is_lead")
    with b.scf.if_(is_lead).then:
        b.smem.store(parts, thread, warp_sums, tv=lc.parse(LEAD_TV))
        b.scf.yield_()
    b.barrier.cta()
    all_parts = b.smem.load(parts, thread, tv=lc.parse(PARTS_TV), type=half, name="all_parts")
    sums = b.frag.reduce(all_parts, thread, tv=lc.parse(OWN_TV), tile=(512, 16), mode=1, kind="add", type=half,
                         name="sums")
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

