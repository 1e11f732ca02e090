"""TMA multistage copy (examples/tma_copy.tile is ``build()`` printed, with comments: 16 x 256 f32 boxes, no
swizzle, 8 stages): one CTA per band of ``bm`` rows, a producer thread loading boxes into a ring of stages and a
consumer thread storing them. ``build(dtype, bm, stages, bn, swizzle)`` makes the same kernel for another element
type, band height, box width or ring depth; ``swizzle=True`` makes the SW128 form (each box row one 128-byte swizzle
row: 32 f32 or 64 bf16 columns, as a GEMM's operand tiles).

Example (post-condition: ``y == x`` exactly, for any shape whose row pitch is a multiple of 16 bytes)::

    >>> import numpy as np
    >>> from ptxgen.interp import interpret
    >>> x = np.random.default_rng(0).standard_normal((20, 300)).astype(np.float32)
    >>> y = np.zeros_like(x)
    >>> interpret(build(), {"x": x, "y": y, "m": 20, "n": 300})
    >>> bool(np.array_equal(y, x))
    True
"""
from ptxgen.ir.builder import KernelBuilder, cdiv, i32, mbarrier, smem, tmap

ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def build(dtype: str = "f32", bm: int = 16, stages: int = 8, bn: int | None = None, swizzle: bool = False):
    """The copy kernel with boxes of ``bm`` x ``bn`` elements in a ring of ``stages``. Default ``bn``: 256 (the
    largest TMA box dim) without swizzle; with ``swizzle`` exactly one 128-byte SW128 row (the only legal width)."""
    esize = ELEMENT_BYTES[dtype]
    if swizzle:
        bn = 128 // esize
        box = f"Sw<3,4,3> o 0 o ({bm},{bn}):({bn},1)"
        ring = f"Sw<3,4,3> o 0 o ({bm},{bn},{stages}):({bn},1,{bm * bn})"
    else:
        bn = bn or 256
        box = f"({bm},{bn}):({bn},1)"
        ring = f"({bm},{bn},{stages}):({bn},1,{bm * bn})"
    tile_bytes = bm * bn * esize
    stage_t = smem(dtype, box)
    kb = KernelBuilder("tma_copy", grid=(cdiv("m", bm), 1, 1), block=(128, 1, 1),
                       x=tmap(dtype, 2, box), y=tmap(dtype, 2, box), m=i32, n=i32)
    b = kb.b
    x, y = kb["x"], kb["y"]
    buf = b.smem.alloc(type=smem(dtype, ring), align=1024 if swizzle else 128, name="buf")  # the map's alignment
    full = b.mbarrier.alloc(count=stages, name="full")
    empty = b.mbarrier.alloc(count=stages, name="empty")
    assert full.type == mbarrier(stages)
    thread = b.gpu.thread_id(dim="x", name="thread")
    block = b.gpu.block_id(dim="x", name="block")
    c0 = b.const(0, i32, name="c0")
    c1 = b.const(1, i32, name="c1")
    n_stages = b.const(stages, i32, name="stages")
    lead = b.const(stages - 1, i32, name="lead")
    c_bm = b.const(bm, i32, name="bm")
    c_bn = b.const(bn, i32, name="bn")
    consumer = b.const(32, i32, name="consumer")
    row0 = b.arith.mul(block, c_bm, name="row0")
    ntiles = b.arith.cdiv(kb["n"], c_bn, name="ntiles")
    is_producer = b.arith.cmp(thread, c0, pred="eq", name="is_producer")
    is_consumer = b.arith.cmp(thread, consumer, pred="eq", name="is_consumer")

    # thread 0 initialises the barriers, fences the inits; the CTA barrier publishes them
    with b.scf.if_(is_producer).then:
        with b.scf.for_(c0, n_stages, c1, args=("b",)) as (bi,):
            b.mbarrier.init(full, bi, arrivals=1)
            b.mbarrier.init(empty, bi, arrivals=1)
            b.scf.yield_()
        b.fence.mbarrier_init()
        b.scf.yield_()
    b.barrier.cta()

    rounds = b.arith.add(ntiles, lead, name="rounds")
    with b.scf.for_(c0, rounds, c1, args=("r",)) as (r,):
        # consumer: tile j = r - (stages - 1)
        j = b.arith.sub(r, lead, name="j")
        j_valid = b.arith.cmp(j, c0, pred="ge", name="j_valid")
        consume = b.arith.and_(is_consumer, j_valid, name="consume")
        with b.scf.if_(consume).then:
            cs = b.arith.rem(j, n_stages, name="cs")
            cpass = b.arith.div(j, n_stages, name="cpass")
            cphase = b.arith.and_(cpass, c1, name="cphase")
            b.mbarrier.wait(full, cs, cphase)
            cstage = b.smem.slice(buf, cs, name="cstage")
            assert cstage.type == stage_t
            ccol = b.arith.mul(j, c_bn, name="ccol")
            b.tma.store(y, cstage, row0, ccol)
            b.tma.store_commit()
            b.tma.store_wait(pending=1, read=True)
            has_prev = b.arith.cmp(j, c1, pred="ge", name="has_prev")
            with b.scf.if_(has_prev).then:
                prev = b.arith.sub(j, c1, name="prev")
                prev_s = b.arith.rem(prev, n_stages, name="prev_s")
                b.mbarrier.arrive(empty, prev_s)
                b.scf.yield_()
            b.scf.yield_()
        # producer: tile i = r
        i_valid = b.arith.cmp(r, ntiles, pred="lt", name="i_valid")
        produce = b.arith.and_(is_producer, i_valid, name="produce")
        with b.scf.if_(produce).then:
            ps = b.arith.rem(r, n_stages, name="ps")
            ppass = b.arith.div(r, n_stages, name="ppass")
            pbit = b.arith.and_(ppass, c1, name="pbit")
            pphase = b.arith.xor(pbit, c1, name="pphase")
            b.mbarrier.wait(empty, ps, pphase)
            pstage = b.smem.slice(buf, ps, name="pstage")
            pcol = b.arith.mul(r, c_bn, name="pcol")
            b.mbarrier.arrive_expect_tx(full, ps, bytes=tile_bytes)
            b.tma.load(x, pstage, full, ps, row0, pcol)
            b.scf.yield_()
        b.scf.yield_()

    # the last stores must have read shared memory before the CTA ends
    with b.scf.if_(is_consumer).then:
        b.tma.store_wait(pending=0, read=True)
        b.scf.yield_()
    return kb.module("ptxgen/kernels/tma_copy")
