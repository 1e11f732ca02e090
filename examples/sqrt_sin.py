"""z = sqrt(sin(x)): the Python-builder twin of examples/sqrt_sin.tile (the same IR, op for op)."""
from ptxgen.ir.builder import KernelBuilder, cdiv, frag, gtensor, i32, partition


def build():
    # 256 threads × 4 contiguous values over a 1024-element tile: (256,4):(4,1)
    tv = partition("copy", threads=(1, 256), vector=4, tile=(1, 1024))
    kb = KernelBuilder("sqrt_sin", grid=(cdiv("n", 1024), 1, 1), block=(256, 1, 1),
                       x=gtensor("f32", 1), z=gtensor("f32", 1), n=i32)
    b = kb.b
    block = b.gpu.block_id(dim="x", name="block")
    thread = b.gpu.thread_id(dim="x", name="thread")
    tile_size = b.const(1024, i32, name="tile_size")
    origin = b.arith.mul(block, tile_size, name="origin")
    x_tile = b.gmem.tile(kb["x"], origin, shape=1024, name="x_tile")
    z_tile = b.gmem.tile(kb["z"], origin, shape=1024, name="z_tile")
    xs = b.gmem.load(x_tile, thread, tv=tv, type=frag("f32", 4), name="xs")
    sines = b.frag.sin(xs, name="sines")
    roots = b.frag.sqrt(sines, name="roots")
    b.gmem.store(z_tile, thread, roots, tv=tv)
    return kb.module("examples/sqrt_sin.py")


if __name__ == "__main__":
    from ptxgen.ir.text import print_module
    print(print_module(build()))
