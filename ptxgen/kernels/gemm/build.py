"""The flagship GEMM's kernel for a ``GemmConfig``: persistent, warp-specialized, pipelined wgmma for Hopper.

- Persistent (``schedule``): ``min(tiles, %sms)`` CTAs; CTA b computes the work items b, b + grid, b + 2·grid, …;
  ``sched.tile`` maps a work item to its (m, n) tile in groups of ``group`` tile rows, so that the CTAs running
  together share A and B panels in L2.
- Warp-specialized: ``gpu.roles`` gives warpgroup 0 to the PRODUCER (registers cut to 24, the least setmaxnreg
  allows) whose thread 0 walks every (tile, k-tile) of its CTA with ONE running iteration counter, acquiring pipeline
  stages and issuing the TMA loads of A's BM × 64 and B's BN × 64 boxes (K-major SW128 GMMA atoms); the two CONSUMER
  warpgroups (registers raised to 240: 128·24 + 256·240 = 64 Ki, the whole register file) each own BM/2 rows of the
  tile (or, ``warpgroups_along = "n"``, all BM rows and BN/2 columns each). Because the counter runs across tiles,
  the producer fills the stages of the next tile while the consumers still store the last one: the epilogue hides
  behind the next tile's loads.
- Mainloop (``mainloop``): per k-tile a consumer waits for the stage, issues its wgmmas (``wgmma.mma`` of (BM/2) × BN
  × 64: BM/128 m64 blocks × 4 k16 steps), commits, and waits with ONE group still pending (``wgmma.wait {pending =
  1}``), so the tensor cores always have the next k-tile queued; only then is the PREVIOUS stage released.
- Epilogue (``epilogue``): the f32 accumulator → bf16/f16, stored through the accumulator's TV layout, or staged in
  smem and stored by TMA or along rows; stores outside C are skipped, and TMA's zero fill makes ragged M, N, K free
  in the mainloop.
"""
from __future__ import annotations

from ptxgen.ir.builder import KernelBuilder, f32, frag, gtensor, i32, smem, tmap
from ptxgen.ir.hostexpr import TupleAttr
from ptxgen.ir.ops.smem import permute_layout, stage_sliced, tile_split

from . import block_scales, epilogue, mainloop, schedule
from .config import ELEMENT_BYTES, GemmConfig


class GemmValues:
    """What the parts of the kernel share while it is built: the builder ``b``, the KernelBuilder ``kb``, the
    config, the shared-memory tensors and pipeline, the thread indices, the constants and the tile counts."""


def build(config: GemmConfig = GemmConfig(), loads_only: bool = False):
    """The kernel module of ``config`` (validated first: a ValueError names the field of a broken rule).
    ``loads_only``: a diagnostic — the same kernel with its wgmmas left out (every stage still loaded by TMA, waited
    for and released as in the GEMM; C holds whatever the empty accumulators give): how fast the config's load
    pipeline alone streams A and B (``benchmarks/bench_gemm.py --loads-only``).

    Parameters: ``%a``, ``%b`` (TMA maps of A (M, K) / B (N, K), or (K, M) / (K, N) for MN-major operands), ``%c``
    (C (M, N): a TMA map for the ``tma`` epilogue, else a gtensor), ``%m``, ``%n``, ``%k``, ``%sms`` (the CTAs the
    device runs at once; the grid is ``min(tiles, %sms)``), then ``%scale_a``, ``%scale_b`` (fp8: C = (A·Bᵀ)·scale_a·
    scale_b) or, for block scales, ``%row_scales``, ``%col_scales`` (``block_scales``; TMA maps with
    ``scales_smem``), ``%work``, ``%flags``
    (stream-K, split-K: ``schedule.streamk_buffers``), ``%bias`` (``bias``: added to C).
    ``build(TILE_FILE)`` prints as examples/gemm_hopper.tile; ``build()`` is the 128 × 256, 4-stage, direct-epilogue
    bf16 kernel. Post: the same IR, op for op and name for name, for the same config (and ``loads_only``); with
    ``loads_only`` no ``wgmma.mma``."""
    config.validate()
    if loads_only and (config.scales == "block" or (config.fp8 and config.promote == 1)):
        raise ValueError(f"build({config.name}, loads_only=True): the load-only diagnostic leaves out the wgmmas of "
                         "the mainloops that queue them per k-tile (mainloop.issue), not those of block scales "
                         "(scales = 'block') or of fp8 promotion every k-tile (promote = 1)")
    g = GemmValues()
    g.config = config
    g.loads_only = loads_only
    dtype, out_dtype, bm, bn, stages, cluster = (config.dtype, config.out_dtype, config.bm, config.bn, config.stages,
                                                 config.cluster_ctas)
    cm, cn = config.cluster_grid
    bk = config.k_tile
    rows = config.rows                               # rows of each of the two consumer warpgroups (BM/2 or BM)
    a_ring, a_box, g.a_loads = mainloop.operand_ring(dtype, bm, stages, config.a_major)
    b_ring, b_box, g.b_loads = mainloop.operand_ring(dtype, bn, stages, config.b_major)
    # what one CTA loads of A and of B: the CTAs of a grid row (cn of them along N) share A, those of a grid column
    # (cm along M) share B, each CTA loading its part
    a_part = tile_split(a_box, 0, bm // cn)[0] if cn > 1 else a_box
    b_part = tile_split(b_box, 0, bn // cm)[0] if cm > 1 else b_box
    a_mk = stage_sliced(a_ring) if config.a_major == "K" else permute_layout(stage_sliced(a_ring), (1, 0))
    g.a_rows_t = smem(dtype, tile_split(a_mk, 0, rows)[0] if config.warpgroups_along == "m" else a_mk)
    g.stage_bytes = (bm + bn) * bk * ELEMENT_BYTES[dtype]
    if config.scales_smem:
        g.stage_bytes += block_scales.stage_scale_bytes(config)   # the stage's scales ride its barrier
    g.acc_t = frag("f32", (config.columns // 2) * (rows // 64))
    # what one promotion adds into a total: the warpgroup's whole accumulator, or (``row_blocks_in_turn``) one m64
    # block of it, the chunk its two row blocks take in turn
    g.chunk_rows = 64 if config.row_blocks_in_turn else rows
    g.chunk_t = frag("f32", bn // 2) if config.row_blocks_in_turn else g.acc_t
    kb = KernelBuilder(
        "gemm_hopper", grid=schedule.grid(config), block=(384, 1, 1),
        cluster=(cluster, 1, 1) if cluster > 1 else None,
        a=tmap(dtype, 2, a_part), b=tmap(dtype, 2, b_part), c=epilogue.c_parameter(config), m=i32, n=i32, k=i32,
        sms=i32,
        **({"scale_a": f32, "scale_b": f32} if config.fp8 and config.scales == "tensor" else {}),
        **(block_scales.parameters(config) if config.scales == "block" else {}),
        **({"work": gtensor("f32", 2), "flags": gtensor("i32", 1)} if config.partial_sums else {}),
        **({"bias": gtensor(out_dtype, 2)} if config.bias else {}))
    g.kb, g.b = kb, kb.b
    b = kb.b
    g.sa = b.smem.alloc(type=smem(dtype, a_ring), align=1024, name="sa")
    g.sb = b.smem.alloc(type=smem(dtype, b_ring), align=1024, name="sb")
    if config.staged:
        g.sc = b.smem.alloc(type=smem(out_dtype, epilogue.staged_c_layout(config)), align=1024, name="sc")
    if config.scales_smem:
        block_scales.alloc_scale_rings(g)
    # the consumers' arrivals per stage: one per warp of the two consumer warpgroups, or one per warpgroup
    releases = {"consumers": 2, "per_warpgroup": True} if config.release_per_warpgroup else {"consumers": 8}
    if cm > 1 and cn > 1:
        # a stage is written by the CTAs of its grid row (A) and column (B): cm + cn - 1 CTAs' consumers release it
        g.pipe = b.pipeline.alloc(stages=stages, **releases, cluster=TupleAttr((cm, cn)), name="pipe")
    elif cluster > 1:
        g.pipe = b.pipeline.alloc(stages=stages, **releases, cluster=cluster, name="pipe")
    else:
        g.pipe = b.pipeline.alloc(stages=stages, **releases, name="pipe")
    g.thread = thread = b.gpu.thread_id(dim="x", name="thread")
    g.wg = b.gpu.warpgroup_id(name="wg")
    if cluster > 1:
        # the work items are cluster tiles ((cm·BM) × (cn·BN)); CTA (i, j) = rank i + cm·j of a cluster takes its
        # part (schedule.tile_of)
        g.c_cluster = b.const(cluster, i32, name="csize")
        g.rank = b.gpu.cluster_rank(name="rank")
        if cm > 1 and cn > 1:
            g.c_cm = b.const(cm, i32, name="ccm")
            g.c_cn = b.const(cn, i32, name="ccn")
            g.rank_i = b.arith.rem(g.rank, g.c_cm, name="rank_i")
            g.rank_j = b.arith.div(g.rank, g.c_cm, name="rank_j")
        else:   # one row or column of CTAs: the rank is the part's index
            g.c_cm = g.c_cn = g.c_cluster
            g.rank_i = g.rank_j = g.rank
        g.first = b.arith.div(b.gpu.block_id(dim="x", name="block"), g.c_cluster, name="first")
        g.step = b.arith.div(b.gpu.grid_dim(dim="x", name="grid"), g.c_cluster, name="step")
    else:
        g.first = b.gpu.block_id(dim="x", name="first")
        g.step = b.gpu.grid_dim(dim="x", name="step")
    g.c0 = c0 = b.const(0, i32, name="c0")
    g.c1 = c1 = b.const(1, i32, name="c1")
    g.c_bk = b.const(bk, i32, name="bk")
    g.c_bm = b.const(bm, i32, name="bm")
    g.c_bn = b.const(bn, i32, name="bn")
    g.c_rows = b.const(rows, i32, name="rows")
    g.c_stages = b.const(stages, i32, name="stages")
    g.c_wg = b.const(128, i32, name="wgsize")
    g.tiles_m = b.arith.cdiv(kb["m"], b.const(bm * cm, i32, name="bmc") if cm > 1 else g.c_bm, name="tiles_m")
    if config.grouped == "masked":
        # %m is M_max (a multiple of BM): tile row tm is tile tm % per_group of group tm / per_group, whose rows are
        # tm·BM … of the flattened (G·M_max, K) A and (G·M_max, N) C
        g.group_tiles_m = g.tiles_m
        g.tiles_m = b.arith.mul(g.tiles_m, kb["groups"], name="all_tiles_m")
    g.tiles_n = b.arith.cdiv(kb["n"], b.const(bn * cn, i32, name="bnc") if cn > 1 else g.c_bn, name="tiles_n")
    g.tiles = tiles = b.arith.mul(g.tiles_m, g.tiles_n, name="tiles")
    g.ktiles = ktiles = b.arith.cdiv(kb["k"], g.c_bk, name="ktiles")
    leader = b.arith.cmp(thread, c0, pred="eq", name="leader")
    with b.scf.if_(leader).then:
        if config.prefetch_maps:
            for name in ("a", "b") + (("c",) if config.epilogue == "tma" else ()):
                b.tma.prefetch_map(kb[name])
        b.pipeline.init(g.pipe)
        b.scf.yield_()
    if cluster > 1:
        b.barrier.cluster()   # every CTA's barriers are initialised before any multicast or remote release
    else:
        b.barrier.cta()

    if config.streamk:
        g.split = schedule.streamk_split(b, g.first, g.step, tiles, ktiles, c0, c1, cluster,
                                         config.streamk_min_saving)
        g.rank_or_zero = g.rank if cluster > 1 else c0
    elif config.splitk:
        g.split = schedule.splitk_split(b, g.first, g.step, tiles, ktiles, kb["sms"], c0, c1)
    role = b.roles(producer=(1, config.registers[0]), consumer=(2, config.registers[1]))
    with role["producer"]:
        with b.scf.if_(leader).then:
            schedule.produce_tiles(g, lambda t, lo, hi, it, *read: mainloop.produce(g, t, lo, hi, it, *read),
                                   (lambda t, tag: mainloop.group_read_of(g, t, tag)) if config.group_ahead
                                   else None)
            b.scf.yield_()
    with role["consumer"]:
        g.cw = b.arith.sub(g.wg, c1, name="cw")
        g.lt = b.arith.rem(thread, g.c_wg, name="lt")
        # the warpgroup's part of the tile: BM/2 rows at row_off, or (warpgroups along N) BN/2 columns at col_off
        if config.warpgroups_along == "m":
            g.row_off, g.col_off = b.arith.mul(g.cw, g.c_rows, name="row_off"), c0
        else:
            columns = b.const(config.columns, i32, name="columns")
            g.row_off, g.col_off = c0, b.arith.mul(g.cw, columns, name="col_off")
        g.fzero = b.const(0.0, f32, name="fzero")
        schedule.consume_tiles(
            g, lambda ct, lo, hi, cit, hook=None: mainloop.consume(g, ct, lo, hi, cit, hook),
            lambda acc, tm, tn: epilogue.c_values(g, acc, tm, tn),
            lambda out, tm, tn: epilogue.store_out(g, out, tm, tn))
    if config.epilogue == "tma":
        epilogue.drain_tma_stores(g)
    if cluster > 1:
        b.barrier.cluster()   # no CTA exits while a peer may still multicast into it or release its stages
    return kb.module("ptxgen/kernels/gemm")
