"""The simple wgmma GEMM: one 128 × BN tile per CTA, a TMA producer warpgroup and two wgmma consumer warpgroups on an
mbarrier pipeline, C stored from the registers (examples/gemm.tile is ``build(SimpleGemmConfig())`` printed, with
comments). Every smem layout, TMA box, byte count and accumulator TV layout is computed from layoutc, never written
by hand. C = A·Bᵀ, A (M, K) and B (N, K) row-major with 16-byte aligned rows, C (M, N) row-major, f32 accumulation.
"""
from __future__ import annotations

from dataclasses import dataclass

from layoutc.hopper import gmma_smem_layout

from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32, partition, pipeline, smem, tmap
from ptxgen.ir.ops.smem import stage_sliced, tile_split

BM, BK = 128, 64   # two consumer warpgroups × 64 rows; one 128-byte SW128 row of 16-bit K per k-tile
CONSUMERS = 2      # consumer warpgroups (warpgroups 1 and 2, after the producer's warpgroup 0)
WARPGROUP = 128    # threads of a warpgroup


@dataclass(frozen=True)
class SimpleGemmConfig:
    """``dtype`` bf16/f16 (A, B and C), ``bn``: the N tile (the wgmma's N: 8 … 256, a multiple of 8), ``stages``:
    the pipeline's depth. ``validate()`` raises ValueError naming the field of a broken rule."""

    dtype: str = "bf16"
    bn: int = 128
    stages: int = 4

    def validate(self) -> "SimpleGemmConfig":
        if self.dtype not in ("bf16", "f16"):
            raise ValueError(f"SimpleGemmConfig.dtype = {self.dtype!r}: the simple GEMM is bf16 or f16")
        if not (8 <= self.bn <= 256 and self.bn % 8 == 0):
            raise ValueError(f"SimpleGemmConfig.bn = {self.bn}: BN is wgmma's N, a multiple of 8 from 8 to 256")
        if self.stages < 1:
            raise ValueError(f"SimpleGemmConfig.stages = {self.stages}: the pipeline needs at least 1 stage")
        return self


def build(config: SimpleGemmConfig = SimpleGemmConfig()):
    """The kernel module: ``%a``, ``%b`` TMA maps of A (M, K) and B (N, K), ``%c`` (M, N), ``%m``, ``%n``, ``%k``; one
    CTA per 128 × BN tile. ``build()`` prints as examples/gemm.tile. Post: the same IR for the same config."""
    config.validate()
    dtype, bn, stages = config.dtype, config.bn, config.stages
    a_ring = gmma_smem_layout("K", "SW128", dtype, (BM, BK, stages))
    b_ring = gmma_smem_layout("K", "SW128", dtype, (bn, BK, stages))
    a_box, b_box = stage_sliced(a_ring), stage_sliced(b_ring)
    a_rows = tile_split(a_box, 0, 64)[0]
    stage_bytes = (BM + bn) * BK * 2
    acc_values = bn // 2
    kb = KernelBuilder("gemm", grid=(cdiv("m", BM), cdiv("n", bn), 1), block=(384, 1, 1),
                       a=tmap(dtype, 2, a_box), b=tmap(dtype, 2, b_box), c=gtensor(dtype, 2), m=i32, n=i32, k=i32)
    b = kb.b
    sa = b.smem.alloc(type=smem(dtype, a_ring), align=1024, name="sa")
    sb = b.smem.alloc(type=smem(dtype, b_ring), align=1024, name="sb")
    pipe = b.pipeline.alloc(stages=stages, consumers=8, name="pipe")
    assert pipe.type == pipeline(stages)
    thread = b.gpu.thread_id(dim="x", name="thread")
    wg = b.gpu.warpgroup_id(name="wg")
    tile_m = b.gpu.block_id(dim="x", name="tile_m")
    tile_n = b.gpu.block_id(dim="y", name="tile_n")
    c0 = b.const(0, i32, name="c0")
    c1 = b.const(1, i32, name="c1")
    bk = b.const(BK, i32, name="bk")
    bm = b.const(BM, i32, name="bm")
    m0 = b.arith.mul(tile_m, bm, name="m0")
    if bn == BM:
        n0 = b.arith.mul(tile_n, bm, name="n0")
    else:
        n0 = b.arith.mul(tile_n, b.const(bn, i32, name="bn"), name="n0")
    ktiles = b.arith.cdiv(kb["k"], bk, name="ktiles")
    leader = b.arith.cmp(thread, c0, pred="eq", name="leader")
    # one thread initialises the pipeline's barriers (and fences the inits); the CTA barrier publishes them
    with b.scf.if_(leader).then:
        b.pipeline.init(pipe)
        b.scf.yield_()
    b.barrier.cta()

    role = b.roles(producer=(1, 40), consumer=(2, 232))
    with role["producer"]:
        with b.scf.if_(leader).then:
            with b.scf.for_(c0, ktiles, c1, args=("kt",)) as (kt,):
                s = b.pipeline.acquire(pipe, kt, bytes=stage_bytes, name="s")
                a_dst = b.smem.slice(sa, s, name="a_dst")
                b_dst = b.smem.slice(sb, s, name="b_dst")
                kc = b.arith.mul(kt, bk, name="kc")
                b.tma.load(kb["a"], a_dst, pipe, s, m0, kc)
                b.tma.load(kb["b"], b_dst, pipe, s, n0, kc)
                b.scf.yield_()
            b.scf.yield_()
    with role["consumer"]:
        cw = b.arith.sub(wg, c1, name="cw")
        fzero = b.const(0.0, f32, name="fzero")
        init = b.frag.splat(fzero, type=frag("f32", acc_values), name="init")
        with b.scf.for_(c0, ktiles, c1, init, args=("kt2", "acc_in"), names=["acc"]) as loop:
            kt2, acc_in = loop
            s2 = b.pipeline.wait(pipe, kt2, name="s2")
            a_stage = b.smem.slice(sa, s2, name="a_stage")
            a_rows_v = b.smem.tile(a_stage, cw, mode=0, size=64, name="a_rows")
            assert a_rows_v.type == smem(dtype, a_rows)
            b_stage = b.smem.slice(sb, s2, name="b_stage")
            b.wgmma.fence()
            acc_out = b.wgmma.mma(a_rows_v, b_stage, acc_in, name="acc_out")
            b.wgmma.commit()
            acc_done = b.wgmma.wait(acc_out, pending=0, name="acc_done")   # the accumulators pass through the wait
            b.pipeline.release(pipe, s2)
            b.scf.yield_(acc_done)
        (acc,) = loop.results
        out = b.frag.cast(acc, type=frag(dtype, acc_values), name="out")
        # the CTA's whole C tile, distributed over both consumer warpgroups by the TiledMMA's accumulator layout:
        # consumer thread ct = thread - 128 (warpgroup 0 is the producer) holds wgmma_acc's values of thread ct
        c_tile = b.gmem.tile(kb["c"], m0, n0, shape=(BM, bn), name="c_tile")
        producer_threads = b.const(WARPGROUP, i32, name="producer_threads")
        ct = b.arith.sub(thread, producer_threads, name="ct")
        b.gmem.store(c_tile, ct, out, tv=partition("wgmma_acc", m=BM, n=bn, warpgroups=CONSUMERS))
    return kb.module("ptxgen/kernels/gemm/simple")
