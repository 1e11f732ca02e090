"""Row L2 normalization: the Python-builder twin of examples/l2norm.tile (the same IR, op for op)."""
from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32

TV = "((32,4),8):((32,1),4)"   # warp w holds row w; lane l holds columns 8l..8l+7 of the (4,256) tile


def build():
    import layoutc as lc
    tv = lc.parse(TV)
    row_frag = frag("f32", 8)
    kb = KernelBuilder("l2norm", grid=(cdiv("m", 4), 1, 1), block=(128, 1, 1),
                       x=gtensor("f32", 2), y=gtensor("f32", 2), m=i32, eps=f32)
    b = kb.b
    block = b.gpu.block_id(dim="x", name="block")
    thread = b.gpu.thread_id(dim="x", name="thread")
    rows = b.const(4, i32, name="rows")
    row0 = b.arith.mul(block, rows, name="row0")
    n = b.gtensor.dim(kb["x"], mode=1, name="n")
    zero = b.const(0, i32, name="zero")
    step = b.const(256, i32, name="step")
    fzero = b.const(0.0, f32, name="fzero")
    init = b.frag.splat(fzero, type=row_frag, name="init")
    with b.scf.for_(zero, n, step, init, args=("col", "acc"), names=("squares",)) as loop:
        col, acc = loop
        x_tile = b.gmem.tile(kb["x"], row0, col, shape=(4, 256), name="x_tile")
        xs = b.gmem.load(x_tile, thread, tv=tv, type=row_frag, name="xs")
        nxt = b.frag.fma(xs, xs, acc, name="next")
        b.scf.yield_(nxt)
    (squares,) = loop.results
    sums = b.frag.reduce(squares, thread, tv=tv, tile=(4, 256), mode=1, kind="add", type=row_frag, name="sums")
    shifted = b.frag.add(sums, kb["eps"], name="shifted")
    scale = b.frag.rsqrt(shifted, name="scale")
    with b.scf.for_(zero, n, step, args=("col2",)) as loop2:
        (col2,) = loop2
        x_tile2 = b.gmem.tile(kb["x"], row0, col2, shape=(4, 256), name="x_tile2")
        y_tile = b.gmem.tile(kb["y"], row0, col2, shape=(4, 256), name="y_tile")
        xs2 = b.gmem.load(x_tile2, thread, tv=tv, type=row_frag, name="xs2")
        ys = b.frag.mul(xs2, scale, name="ys")
        b.gmem.store(y_tile, thread, ys, tv=tv)
        b.scf.yield_()
    return kb.module("examples/l2norm.py")


if __name__ == "__main__":
    from ptxgen.ir.text import print_module
    print(print_module(build()))
