"""Elementwise kernels: one CTA per tile of a 1-D tensor, each thread a few contiguous values through a TV layout.

``build()`` is examples/sqrt_sin.tile's kernel, z = sqrt(sin(x)) (the interpreter's and the lowering's smallest
complete example: gmem tiles, a TV load, two frag ops, a TV store, a grid from ``cdiv(%n, 1024)``).

Example (post-condition: ``z = sqrt(sin(x))`` for every element, any n)::

    >>> import numpy as np
    >>> from ptxgen.interp import interpret
    >>> x = np.linspace(0.0, 3.0, 1000, dtype=np.float32)
    >>> z = np.zeros_like(x)
    >>> interpret(build(), {"x": x, "z": z, "n": 1000})
    >>> bool(np.allclose(z, np.sqrt(np.sin(x)), rtol=1e-6))
    True
"""

from ptxgen.ir.builder import KernelBuilder, cdiv, frag, gtensor, i32, partition


def build():
    """The kernel of examples/sqrt_sin.tile: z = sqrt(sin(x)) over %n f32 elements, one CTA of 256 threads per
    1024-element tile, each thread 4 contiguous values (the copy partition, TV ``(256,4):(4,1)``); elements past %n are neither read
    nor written. Post: ``print_module(build())`` prints as examples/sqrt_sin.tile (op for op, name for name), and
    interpreting it on x in [0, pi) gives z = sqrt(sin(x)) to f32 rounding."""
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
    return kb.module("ptxgen/kernels/elementwise")

