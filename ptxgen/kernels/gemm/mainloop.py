"""The mainloop: the producer's TMA loads of A's and B's k-tiles into the pipeline's stages, and the consumers'
wgmmas over them — one wgmma group kept in flight (``pending = 1``), each stage released once the wgmmas after it
are queued; for fp8 the products of every ``promote`` k-tiles summed into a chunk that joins an f32 total
(DeepGEMM's promotion), the two consumer warpgroups half a chunk apart."""
from __future__ import annotations

import functools

from layoutc.hopper import gmma_smem_layout

from ptxgen.ir.builder import i32
from ptxgen.ir.ops.smem import permute_layout, stage_sliced, tile_split

from . import block_scales
from .config import k_tile
from .schedule import promotion_stagger, tile_of, tile_origin


def operand_ring(dtype: str, rows: int, stages: int, major: str):
    """(the smem ring of an operand in GLOBAL mode order, the TMA box of one load, loads per stage) for an operand of
    ``rows`` MN rows × one k-tile: ``major = "K"`` — the global tensor is (rows, K) with K contiguous, one box per
    stage, the ring is already (MN, K, stage) for wgmma; ``"MN"`` — the global tensor is (K, rows) with MN
    contiguous, the ring is the MN-major GMMA layout with its modes in (K, MN, stage) order (what TMA writes), loaded
    in boxes of 64 MN columns (one 128-byte SW128 row), and seen by wgmma through ``smem.permute``.
    ``operand_ring("bf16", 128, 4, "K")[0]`` = Sw<3,4,3> o 0 o ((8,16),(64,1),(1,4)):((64,512),(1,0),(0,8192))."""
    bk = k_tile(dtype)
    if major == "K":
        ring = gmma_smem_layout("K", "SW128", dtype, (rows, bk, stages))
        return ring, stage_sliced(ring), 1
    if major != "MN":
        raise ValueError(f"major must be 'K' or 'MN', not {major!r}")
    # atoms along K first (order (1, 0, 2)): each 64-column MN chunk of a stage is then one contiguous TMA box
    mn = gmma_smem_layout("MN", "SW128", dtype, (rows, bk, stages), order=(1, 0, 2))
    ring = permute_layout(mn, (1, 0, 2))
    return ring, tile_split(stage_sliced(ring), 1, 64)[0], rows // 64


def load_mn_major(b, tmap_v, dst, pipe, s, kc, mn0, loads, tag):
    """The TMA loads of one MN-major stage: box j writes MN columns 64j … 64j+63 of the (K, MN) stage from global
    coordinate (kc, mn0 + 64j)."""
    c64 = b.const(64, i32, name=f"{tag}_c64")
    for j in range(loads):
        cj = b.const(j, i32, name=f"{tag}_j{j}")
        box = b.smem.tile(dst, cj, mode=1, size=64, name=f"{tag}_box{j}")
        col = b.arith.add(mn0, b.arith.mul(cj, c64, name=f"{tag}_off{j}"), name=f"{tag}_col{j}")
        b.tma.load(tmap_v, box, pipe, s, kc, col)


def release_previous(b, pipe, cond, kit, c1, c_stages, name):
    """``scf.if cond``: release the stage of iteration ``kit - 1`` (values ``%name``, ``%name_s``)."""
    with b.scf.if_(cond).then:
        prev = b.arith.sub(kit, c1, name=name)
        b.pipeline.release(pipe, b.arith.rem(prev, c_stages, name=f"{name}_s"))
        b.scf.yield_()


def produce(g, t, lo, hi, it, group_read=None):
    """The producer's TMA loads of k-tiles lo … hi-1 of work item t (CTA (i, j) of a cm × cn cluster loading part j
    of A multicast to its grid row and part i of B multicast to its grid column; a whole box where its side of the
    grid is 1); → the iteration counter after them. ``group_read`` (grouped, ``group_ahead``): ``block_scales.group_read``'s value for t's tile row, loaded by
    the caller a tile earlier."""
    b, kb, config = g.b, g.kb, g.config
    c1 = g.c1
    tm, tn = tile_of(g, t, ("tm", "tn", "tmc", "tm_own"))
    m0, n0 = tile_origin(g, tm, tn, ("m0", "n0"))
    group = masked_rows = None
    if config.grouped != "none":
        # B is (G·N, K): the group's rows start at group·N; a masked tile past its group's rows loads nothing
        group, has_rows, masked_rows = block_scales.tile_group(g, tm, g.thread, 384, "p", group_read)
        n0 = b.arith.add(n0, b.arith.mul(group, kb["n"], name="group_n0"), name="n0_grouped")
        if has_rows is not None:
            hi = b.arith.select(has_rows, hi, lo, name="hi_p")
    cm, cn = config.cluster_grid
    if cn > 1:
        # the CTAs of a grid row (same i) share A: CTA j loads BM/cn rows of the A box into each one's stage
        c_part = b.const(config.bm // cn, i32, name="apart")
        m_part = b.arith.add(m0, b.arith.mul(g.rank_j, c_part, name="part_off" if cm == 1 else "a_part_off"),
                             name="m_part")
    if cm > 1:
        # the CTAs of a grid column (same j) share B: CTA i loads BN/cm rows of the B box into each one's stage
        c_part = b.const(config.bn // cm, i32, name="bpart")
        n_part = b.arith.add(n0, b.arith.mul(g.rank_i, c_part, name="part_off"), name="n_part")
    # multicast to the grid column (mode 0) or row (mode 1); a mode spanning the whole cluster is spelled true
    a_multicast = True if cm == 1 else 1
    b_multicast = True if cn == 1 else 0

    def load(kt, s, tag):
        a_dst = b.smem.slice(g.sa, s, name=f"a_dst{tag}")
        b_dst = b.smem.slice(g.sb, s, name=f"b_dst{tag}")
        kc = b.arith.mul(kt, g.c_bk, name=f"kc{tag}")
        if cn > 1:
            a_part = b.smem.tile(a_dst, g.rank_j, mode=0, size=config.bm // cn, name=f"a_part_dst{tag}")
            b.tma.load(kb["a"], a_part, g.pipe, s, m_part, kc, multicast=a_multicast)
        elif config.a_major == "K":
            b.tma.load(kb["a"], a_dst, g.pipe, s, m0, kc)
        else:
            load_mn_major(b, kb["a"], a_dst, g.pipe, s, kc, m0, g.a_loads, f"a{tag}")
        if config.b_major == "MN":
            load_mn_major(b, kb["b"], b_dst, g.pipe, s, kc, n0, g.b_loads, f"b{tag}")
        elif cm > 1:
            b_half = b.smem.tile(b_dst, g.rank_i, mode=0, size=config.bn // cm, name=f"b_part_dst{tag}")
            b.tma.load(kb["b"], b_half, g.pipe, s, n_part, kc, multicast=b_multicast)
        else:
            b.tma.load(kb["b"], b_dst, g.pipe, s, n0, kc)
        if config.scales_smem:
            block_scales.load_stage_scales(g, s, kt, m0, tn, group, tag,
                                           masked_rows[0] if masked_rows is not None else None)

    batch = config.load_batch
    if batch > 1:
        # whole batches: hold `batch` stages, then load them back to back (the rest one k-tile at a time below)
        c_batch = b.const(batch, i32, name="load_batch")
        batches = b.arith.div(b.arith.max(b.arith.sub(hi, lo, name="k_span"), g.c0, name="k_span0"), c_batch,
                              name="batches")
        batched_end = b.arith.add(lo, b.arith.mul(batches, c_batch, name="batched_span"), name="batched_end")
        with b.scf.for_(lo, batched_end, c_batch, it, args=("kb0", "bit"), names=["it_batched"]) as bloop:
            kb0, bit = bloop
            held = []
            for j in range(batch):
                cj = b.const(j, i32, name=f"batch_j{j}")
                held.append(b.pipeline.acquire(g.pipe, b.arith.add(bit, cj, name=f"bit{j}"), bytes=g.stage_bytes,
                                               name=f"s_b{j}"))
            for j, s in enumerate(held):
                cj = b.const(j, i32, name=f"batch_k{j}")
                load(b.arith.add(kb0, cj, name=f"kt_b{j}"), s, f"_b{j}")
            b.scf.yield_(b.arith.add(bit, c_batch, name="bit_next"))
        lo, it = batched_end, bloop.results[0]
    with b.scf.for_(lo, hi, c1, it, args=("kt", "pit"), names=["it_next"]) as loop:
        kt, pit = loop
        load(kt, b.pipeline.acquire(g.pipe, pit, bytes=g.stage_bytes, name="s"), "")
        b.scf.yield_(b.arith.add(pit, c1, name="pit1"))
    return loop.results[0]


def warpgroup_a(g, a_stage, tag):
    """The consumer warpgroup's part of a stage's A (MN, K) view: its BM/2 rows, or all BM (``warpgroups_along =
    "n"``)."""
    if g.config.warpgroups_along == "n":
        return a_stage
    return g.b.smem.tile(a_stage, g.cw, mode=0, size=g.config.rows, name=f"a_rows{tag}")


def warpgroup_b(g, b_stage, tag):
    """The consumer warpgroup's part of a stage's B (N, K) view: all of it, or its BN/2 rows (``warpgroups_along =
    "n"``)."""
    if g.config.warpgroups_along == "m":
        return b_stage
    return g.b.smem.tile(b_stage, g.cw, mode=0, size=g.config.columns, name=f"b_cols{tag}")


def issue(g, acc_in, kit, tag="", fence_inline=False):
    """Wait for iteration ``kit``'s stage and queue its wgmmas onto ``acc_in``; → (acc, stage). ``fence_inline``:
    the wgmma.fence in the wgmmas' own asm statement (``{fence = true}``), so nothing is scheduled between them."""
    b, config = g.b, g.config
    s2 = b.pipeline.wait(g.pipe, kit, name=f"s2{tag}")
    if g.loads_only:   # build's diagnostic: the stage is waited for and released, never read
        return acc_in, s2
    a_stage = b.smem.slice(g.sa, s2, name=f"a_stage{tag}")
    if config.a_major == "MN":
        a_stage = b.smem.permute(a_stage, order=(1, 0), name=f"a_stage_mk{tag}")
    a_rows = warpgroup_a(g, a_stage, tag)
    assert a_rows.type == g.a_rows_t
    b_stage = b.smem.slice(g.sb, s2, name=f"b_stage{tag}")
    if config.b_major == "MN":
        b_stage = b.smem.permute(b_stage, order=(1, 0), name=f"b_stage_nk{tag}")
    b_stage = warpgroup_b(g, b_stage, tag)
    if fence_inline:
        acc_out = b.wgmma.mma(a_rows, b_stage, acc_in, fence=True, name=f"acc_out{tag}")
    else:
        b.wgmma.fence()
        acc_out = b.wgmma.mma(a_rows, b_stage, acc_in, name=f"acc_out{tag}")
    b.wgmma.commit()
    return acc_out, s2


def k_tiles(g, lo, hi, acc_start, kit_start, hook=None, tag=""):
    """The wgmmas of k-tiles lo … hi-1 accumulated onto ``acc_start``, each k-tile's stage released once the NEXT
    k-tile's wgmmas are queued (``pending``); → (the accumulator, still in flight unless pending = 0, and the
    iteration counter after hi-1). The last stage is released by the caller. ``hook`` (pending = 1): the wgmmas of
    the first ``overlap`` k-tiles are queued without waiting, then ``hook()`` runs while the tensor cores work
    through them (the previous tile's epilogue), then their stages but the last are released. No branch carries the
    accumulator in flight (C7514): the peeled k-tiles are a loop of at most ``overlap`` trips."""
    b, config = g.b, g.config
    c1, c_stages, pipe, pending, overlap = g.c1, g.c_stages, g.pipe, config.pending, config.overlap
    if hook is not None:
        c_overlap = b.const(overlap, i32, name=f"overlap{tag}")
        peel_end = b.arith.min(b.arith.add(lo, c_overlap, name=f"peel_end0{tag}"), hi, name=f"peel_end{tag}")
        with b.scf.for_(lo, peel_end, c1, acc_start, kit_start, args=(f"kp{tag}", f"acc_p{tag}", f"kit_p{tag}"),
                        names=[f"acc_peeled{tag}", f"kit_peeled{tag}"]) as ploop:
            _kp, acc_p, kit_p = ploop
            acc_q, _s = issue(g, acc_p, kit_p, f"_peel{tag}")
            b.scf.yield_(acc_q, b.arith.add(kit_p, c1, name=f"kit_p1{tag}"))
        acc_start, kit_peeled = ploop.results
        hook()
        if overlap > 1:
            b.wgmma.wait(pending=1)
            # every peeled k-tile but the last is done: their stages go back to the producer
            kit_last = b.arith.max(b.arith.sub(kit_peeled, c1, name=f"kit_last0{tag}"), kit_start,
                                   name=f"kit_last{tag}")
            with b.scf.for_(kit_start, kit_last, c1, args=(f"kr{tag}",)) as rloop:
                (kr,) = rloop
                b.pipeline.release(pipe, b.arith.rem(kr, c_stages, name=f"kr_s{tag}"))
                b.scf.yield_()
        loop_lo, kit_start = peel_end, kit_peeled
    else:
        loop_lo = lo
    # has_prev and any_k compare with lo: after peeled k-tiles the loop's first trip releases the last one
    with b.scf.for_(loop_lo, hi, c1, acc_start, kit_start, args=(f"kt2{tag}", f"acc_in{tag}", f"kit{tag}"),
                    names=[f"acc{tag}", f"kit_end{tag}"]) as mloop:
        kt2, acc_in, kit = mloop
        acc_out, s2 = issue(g, acc_in, kit, tag)
        if pending:
            b.wgmma.wait(pending=pending)
            # the wgmmas of the previous k-tile are done: hand its stage back to the producer
            has_prev = b.arith.cmp(kt2, lo, pred="gt", name=f"has_prev{tag}")
            release_previous(b, pipe, has_prev, kit, c1, c_stages, f"prev{tag}")
        else:
            acc_out = b.wgmma.wait(acc_out, pending=0, name=f"acc_done_k{tag}")
            b.pipeline.release(pipe, s2)
        b.scf.yield_(acc_out, b.arith.add(kit, c1, name=f"kit1{tag}"))
    acc, kit_end = mloop.results
    if pending:
        # the accumulators pass through the wait: nothing reads them before the last wgmmas completed
        acc = b.wgmma.wait(acc, pending=0, name=f"acc_done{tag}")
        any_k = b.arith.cmp(hi, lo, pred="gt", name=f"any_k{tag}")
        release_previous(b, pipe, any_k, kit_end, c1, c_stages, f"last{tag}")
    return acc, kit_end


def promote_every_k_tile(g, init, lo, hi, cit):
    """The fp8 mainloop over k-tiles lo … hi-1 (a whole tile, or a stream-K piece's run) promoting every k-tile
    (128 deep, DeepGEMM's interval) with the two consumer warpgroups half a k-tile apart: each k-tile's wgmmas are issued as two K-halves (two m64nNk32 each); warpgroup 0's chunk is
    one k-tile, warpgroup 1's is the second half of one k-tile and the first half of the next. When warpgroup 0
    waits for its chunk and adds it, warpgroup 1's second half is still queued on the tensor cores, and the other way
    round. Each warpgroup has its own loop (an accumulator in flight must not pass through the phi of a branch: the
    copies would read it and ptxas would serialize every wgmma, C7514). → (the f32 total of k-tiles lo … hi-1
    from ``init``, the iteration counter after k-tile hi-1)."""
    b = g.b
    pipe, sa, sb, cw, acc_t = g.pipe, g.sa, g.sb, g.cw, g.acc_t
    c0, c1, c_stages, fzero = g.c0, g.c1, g.c_stages, g.fzero
    half = g.config.k_tile // 2

    def stage_halves(kit, tag):
        s2 = b.pipeline.wait(pipe, kit, name=f"s2{tag}")
        a_rows = warpgroup_a(g, b.smem.slice(sa, s2, name=f"a_stage{tag}"), tag)
        b_stage = warpgroup_b(g, b.smem.slice(sb, s2, name=f"b_stage{tag}"), tag)
        halves = [(b.smem.tile(a_rows, c, mode=1, size=half, name=f"a_{h}{tag}"),
                   b.smem.tile(b_stage, c, mode=1, size=half, name=f"b_{h}{tag}")) for h, c in (("lo", c0), ("hi", c1))]
        return s2, halves

    first_wg = b.arith.cmp(cw, c0, pred="eq", name="first_wg")
    branch = b.scf.if_(first_wg, types=(acc_t, i32), names=["total", "kit_end"])
    with branch.then:
        with b.scf.for_(lo, hi, c1, init, cit, args=("kt0", "total_in0", "kit0"),
                        names=["total0", "kit_end0"]) as loop0:
            _kt, total_in, kit = loop0
            s2, ((a_lo, b_lo), (a_hi, b_hi)) = stage_halves(kit, "_0")
            zero = b.frag.splat(fzero, type=acc_t, name="zero_0")
            b.wgmma.fence()
            whole = b.wgmma.mma(a_lo, b_lo, zero, name="ktile_chunk_lo")
            whole = b.wgmma.mma(a_hi, b_hi, whole, name="ktile_chunk")
            b.wgmma.commit()
            whole = b.wgmma.wait(whole, pending=0, name="ktile_chunk_done")
            b.pipeline.release(pipe, s2)
            b.scf.yield_(b.frag.add(total_in, whole, name="total_out0"), b.arith.add(kit, c1, name="kit_next0"))
        b.scf.yield_(*loop0.results)
    with branch.otherwise:
        # the chunk opened by a k-tile's second half closes with the next k-tile's first half
        zero = b.frag.splat(fzero, type=acc_t, name="zero_1")
        with b.scf.for_(lo, hi, c1, init, zero, cit, args=("kt1", "total_in1", "open_in", "kit1"),
                        names=["total1", "open", "kit_end1"]) as loop1:
            kt, total_in, open_in, kit = loop1
            s2, ((a_lo, b_lo), (a_hi, b_hi)) = stage_halves(kit, "_1")
            b.wgmma.fence()
            closing = b.wgmma.mma(a_lo, b_lo, open_in, name="closing")
            b.wgmma.commit()
            closing = b.wgmma.wait(closing, pending=0, name="closing_done")
            has_prev = b.arith.cmp(kt, lo, pred="gt", name="has_prev1")
            release_previous(b, pipe, has_prev, kit, c1, c_stages, "prev1")
            total_out = b.frag.add(total_in, closing, name="total_out1")
            zero_k = b.frag.splat(fzero, type=acc_t, name="zero_k")
            b.wgmma.fence()
            opened = b.wgmma.mma(a_hi, b_hi, zero_k, name="opened")
            b.wgmma.commit()
            b.scf.yield_(total_out, opened, b.arith.add(kit, c1, name="kit_next1"))
        total1, open_chunk, kit_end1 = loop1.results
        # the last k-tile's second half is still in flight (a zero chunk when there was no k-tile)
        open_chunk = b.wgmma.wait(open_chunk, pending=0, name="open_done")
        any_k = b.arith.cmp(hi, lo, pred="gt", name="any_k1")
        release_previous(b, pipe, any_k, kit_end1, c1, c_stages, "last1")
        b.scf.yield_(b.frag.add(total1, open_chunk, name="total_all"), kit_end1)
    return branch.results


PINGPONG_BARRIER = 2   # the named barrier of ``pingpong``'s turns (1 is the staged epilogue's)


def promote_block_scaled(g, init, lo, hi, cit, tm, tn, hook=None):
    """The mainloop of block scales (``scales="block"``): each k-tile (one 128-deep scale block) is accumulated by
    its wgmmas into a chunk from zero, waited for, and promoted on the CUDA cores, total += chunk · scale with the
    scale of each value's row and column (``block_scales.scale_fragment``). The two consumer warpgroups promote
    independently, so one's wgmmas run while the other promotes. Options: ``scale_prefetch`` (k-tile kt+1's scales
    loaded during k-tile kt, the product formed after kt's wait: no load between a stage's arrival and its wgmmas;
    without it the k-tile's own scales are loaded and multiplied before its wgmmas are issued), ``pingpong``
    (warpgroup 1 issues a k-tile's wgmmas after warpgroup 0 has issued its own: their chunks complete one after the
    other, each promotion behind the other warpgroup's wgmmas), ``late_scales`` (``block_scales.promote_late``: no
    instruction reading a scale load can precede the k-tile's wgmmas), ``scales_smem`` (the scales arrived with the
    stage: read by ld.shared after its wait, while its wgmmas run; ``block_scales.stage_scale_loads``),
    ``zero_rows_late`` (grouped: no row validity in the scales; the rows outside their group zeroed once,
    ``block_scales.zero_outside``, their reads issued behind k-tile lo's wgmmas) and ``hook`` (``overlap``: k-tile
    lo's wgmmas are issued, then ``hook()`` — the previous tile's epilogue — runs while they execute). BM = 256
    (``row_blocks_in_turn``): ``promote_row_blocks``. → (the f32 total, the iteration counter after k-tile hi-1)."""
    b, config = g.b, g.config
    if config.row_blocks_in_turn:
        return promote_row_blocks(g, init, lo, hi, cit, tm, tn, hook)
    prefetch = config.scale_prefetch
    group = valid = reads = masked_rows = None
    if config.grouped != "none":
        # grouped: the tile's group picks B's scale blocks; rows outside their group get scale 0 (zero_rows_late: a
        # zero total); a masked tile past its group's rows runs no k-tile (its C is written as zeros), as its
        # producer loads none
        group, has_rows, masked_rows = block_scales.tile_group(g, tm, g.lt, 128, "c")
        if has_rows is not None:
            hi = b.arith.select(has_rows, hi, lo, name="hi_c")
        if config.zero_rows_late:
            # with a hook, read behind the peeled k-tile's wgmmas (below): LLVM folds the comparison into the guarded
            # load's block, so the reads are waited for where they are issued
            reads = block_scales.row_reads(g, tm, masked_rows) if hook is None else None
        else:
            valid = block_scales.row_validity(g, tm, masked_rows)
    if config.pingpong:
        first_wg = b.arith.cmp(g.cw, g.c0, pred="eq", name="pp_first")
        second_wg = b.arith.cmp(g.cw, g.c0, pred="ne", name="pp_second")

    def issue_in_turn(acc_in, kit, tag):
        """``issue``, warpgroup 1 after warpgroup 0 with ``pingpong`` (no branch carries the accumulator: C7514)."""
        if config.pingpong:
            with b.scf.if_(second_wg).then:
                b.barrier.named(id=PINGPONG_BARRIER, threads=256)
                b.scf.yield_()
        acc_out, s2 = issue(g, acc_in, kit, tag)
        if config.pingpong:
            with b.scf.if_(first_wg).then:
                b.barrier.named(id=PINGPONG_BARRIER, threads=256)
                b.scf.yield_()
        return acc_out, s2

    def loads(kt, tag):
        return block_scales.scale_loads(g, kt, tm, tn, group, masked_rows, tag)

    late, in_smem = config.late_scales, config.scales_smem
    if config.chunk_ahead:
        row_reads = None
        if config.zero_rows_late and config.grouped != "none" and reads is None:
            row_reads = functools.partial(block_scales.row_reads, g, tm, masked_rows)
        total, kit_done, late_reads = promote_chunk_ahead(g, init, lo, hi, cit, valid, block_scales.later_blocks(g, tn),
                                                          hook, row_reads)
        reads = reads if late_reads is None else late_reads
        if late and valid is not None:
            total = b.frag.mul(total, valid, name="total_valid")
        return (total if reads is None else block_scales.zero_outside(g, total, reads)), kit_done
    if not (prefetch or late or in_smem or config.pingpong or hook is not None):
        with b.scf.for_(lo, hi, g.c1, init, cit, args=("kt_b", "total_in", "kit_b"),
                        names=["total", "kit_done"]) as loop:
            kt, total_in, kit = loop
            scale = block_scales.scale_fragment(g, kt, tm, tn, group, valid, masked_rows)
            zero = b.frag.splat(g.fzero, type=g.acc_t, name="zero")
            chunk, s2 = issue(g, zero, kit, "_b")
            chunk = b.wgmma.wait(chunk, pending=0, name="chunk")
            b.pipeline.release(g.pipe, s2)
            total_out = b.frag.fma(chunk, scale, total_in, name="total_out")
            b.scf.yield_(total_out, b.arith.add(kit, g.c1, name="kit_b1"))
        total, kit_done = loop.results
        return (total if reads is None else block_scales.zero_outside(g, total, reads)), kit_done
    later = block_scales.later_blocks(g, tn)
    total0, kit0, loop_lo = init, cit, lo
    if hook is not None:
        # k-tile lo: its wgmmas queued (a loop of at most one trip: no branch carries them in flight), the previous
        # tile's epilogue, then its promotion; its scales are loaded before the epilogue and k-tile lo+1's with them
        # (scales_smem: read from the peeled stage inside the loop, zeros when it has no trip)
        first_scales = None if in_smem else loads(_first_k_tile(g, lo, hi), "_h")
        peel_end = b.arith.min(b.arith.add(lo, g.c1, name="peel_end0"), hi, name="peel_end")
        zero = b.frag.splat(g.fzero, type=g.acc_t, name="zero_h")
        smem_parts = block_scales.scale_parts(config) if in_smem else 0
        with b.scf.for_(lo, peel_end, g.c1, zero, cit, *[zero] * smem_parts,
                        args=("kp", "chunk_p", "kit_p") + tuple(f"scale_p{i}" for i in range(smem_parts)),
                        names=["chunk_peeled", "kit_peeled"] + [f"scale_h{i}" for i in range(smem_parts)]) as ploop:
            kp, chunk_p, kit_p, *_scales_p = ploop
            chunk_q, s_q = issue_in_turn(chunk_p, kit_p, "_h")
            got = block_scales.stage_scale_loads(g, s_q, kp, "_h") if in_smem else []
            b.scf.yield_(chunk_q, b.arith.add(kit_p, g.c1, name="kit_p1"), *got)
        chunk_h, kit0, *smem_scales = ploop.results
        if in_smem:
            first_scales = smem_scales
        next_scales = loads(peel_end, "_first") if prefetch else None
        if config.zero_rows_late and config.grouped != "none":
            reads = block_scales.row_reads(g, tm, masked_rows)
        hook()
        chunk_h = b.wgmma.wait(chunk_h, pending=0, name="chunk_h")
        any_k = b.arith.cmp(peel_end, lo, pred="gt", name="any_k_h")
        release_previous(b, g.pipe, any_k, kit0, g.c1, g.c_stages, "peeled")
        if late:
            total0 = block_scales.promote_late(g, chunk_h, first_scales, later, init, "_h")
        else:
            scale_h = block_scales.scale_product(g, first_scales, valid, later, "_h")
            total0 = b.frag.fma(chunk_h, scale_h, init, name="total_h")
        loop_lo = peel_end
    elif prefetch:
        next_scales = loads(lo, "_first")
    carried = list(next_scales) if prefetch else []
    with b.scf.for_(loop_lo, hi, g.c1, total0, kit0, *carried,
                    args=("kt_b", "total_in", "kit_b") + tuple(f"scale_in{i}" for i in range(len(carried))),
                    names=["total", "kit_done"] + [f"scale_left{i}" for i in range(len(carried))]) as loop:
        kt, total_in, kit, *current = loop
        if prefetch:
            # this k-tile's scales, loaded a k-tile ago, multiplied; the next k-tile's loads issued now. (LLVM still
            # copies the loaded values into the loop's registers at its end, and ptxas places those copies — which
            # wait for the loads — before the k-tile's wgmmas, as it places the product without prefetch: the load
            # latency stays on the issue path; ``late_scales`` removes it)
            factors = block_scales.scale_factors(g, current, valid)
            following = loads(b.arith.add(kt, g.c1, name="kt_next"), "_next")
        elif not in_smem:
            current = loads(kt, "")
        zero = b.frag.splat(g.fzero, type=g.acc_t, name="zero")
        chunk, s2 = issue_in_turn(zero, kit, "_b")
        if in_smem:
            # the stage has arrived (its scales with it): ld.shared while its wgmmas run
            current = block_scales.stage_scale_loads(g, s2, kt)
        chunk = b.wgmma.wait(chunk, pending=0, name="chunk")
        b.pipeline.release(g.pipe, s2)
        if late:
            total_out = block_scales.promote_late(g, chunk, current, later, total_in)
        else:
            scale = block_scales.pick_scale(g, factors, later) if prefetch else \
                block_scales.scale_product(g, current, valid, later)
            total_out = b.frag.fma(chunk, scale, total_in, name="total_out")
        b.scf.yield_(total_out, b.arith.add(kit, g.c1, name="kit_b1"), *(following if prefetch else ()))
    total, kit_done = loop.results[:2]
    if late and valid is not None:
        # the rows outside their group: 0 × Σ (chunk · scales), as 0 × each k-tile's term would give
        total = b.frag.mul(total, valid, name="total_valid")
    if reads is not None:
        total = block_scales.zero_outside(g, total, reads)
    return total, kit_done


def promote_row_blocks(g, init, lo, hi, cit, tm, tn, hook=None):
    """Block scales with BM = 256 (``row_blocks_in_turn``, DeepGEMM's scheme): per k-tile each consumer warpgroup
    takes its two 64-row wgmma blocks ONE AFTER THE OTHER with one chunk of BN/2 registers — for r = 0, 1: row
    block r's wgmmas (its 64 rows of the stage's A, the whole B stage) into the chunk from zero, commit, wait
    (pending = 0), total_r += chunk · scale (``block_scales.scale_product``, or ``promote_late``, in the 64-row
    block's shape, straddling B scales included); the stage is released after block 1's wait. Registers: one chunk
    and two totals, 3 · BN/2 (192 for BN = 128). Nothing is in flight across a branch or a back edge (C7514).

    With ``hook`` (``overlap = 1``): k-tile lo's block-0 wgmmas are queued (a loop of at most one trip), ``hook()``
    — the previous tile's epilogue — runs while they execute, then block 0 is promoted and block 1 of k-tile lo
    issued, waited for and promoted (a second loop of at most one trip); no k-tile (lo = hi) adds 0 × 0.
    Scales: ``scales_smem``, read from the stage after block 0's wgmmas are issued
    (``block_scales.row_block_stage_scales``), else loaded from global memory before them
    (``block_scales.row_block_scale_loads``). → (the (128, BN) f32 total of k-tiles lo … hi-1 from ``init`` — the
    two blocks' totals joined by ``frag.concat`` in the accumulator's value order, block p's values at (BN/2)·p … —,
    the iteration counter after k-tile hi-1)."""
    b, config = g.b, g.config
    c1, pipe, chunk_t = g.c1, g.pipe, g.chunk_t
    assert config.rows == 2 * g.chunk_rows
    in_smem = config.scales_smem
    later = block_scales.later_blocks(g, tn)
    first_block = b.arith.mul(g.cw, b.const(2, i32, name="rb_blocks"), name="rb_first")

    def issue_block(stage, r, tag, done=None):
        """Row block r's wgmmas of ``stage`` into a chunk from zero, committed; ``done``: the previous row block's
        waited and promoted chunk, whose registers the new chunk takes over (``wgmma.mma {discard_c = true}``: its
        values ignored) — two chunk ranges in ptxas's allocation would need BN/2 registers more."""
        a_stage = b.smem.slice(g.sa, stage, name=f"a_stage{tag}")
        index = b.arith.add(first_block, c1, name=f"rb_second{tag}") if r else first_block
        a_block = b.smem.tile(a_stage, index, mode=0, size=g.chunk_rows, name=f"a_block{tag}")
        b_stage = b.smem.slice(g.sb, stage, name=f"b_stage{tag}")
        zero = b.frag.splat(g.fzero, type=chunk_t, name=f"zero{tag}") if done is None else None
        b.wgmma.fence()
        if done is None:
            chunk = b.wgmma.mma(a_block, b_stage, zero, name=f"chunk{tag}")
        else:
            chunk = b.wgmma.mma(a_block, b_stage, done, discard_c=True, name=f"chunk{tag}")
        b.wgmma.commit()
        return chunk

    def scales(stage, kt, tag):
        if in_smem:
            return block_scales.row_block_stage_scales(g, stage, kt, tag)
        return block_scales.row_block_scale_loads(g, kt, tm, tn, tag)

    def done(chunk, tag):
        return b.wgmma.wait(chunk, pending=0, name=f"chunk_done{tag}")

    def promote(chunk, row, columns, total, tag):
        if config.late_scales:
            return block_scales.promote_late(g, chunk, [row] + columns, later, total, tag)
        scale = block_scales.scale_product(g, [row] + columns, None, later, tag)
        return b.frag.fma(chunk, scale, total, name=f"total{tag}")

    def pinned(total, tag):
        """Block 0's promotion held before block 1's wgmmas: a wait that completes nothing (no group is in flight)
        but reads the new total, so LLVM cannot sink the promotion below block 1's issue, where the two chunks
        would both be live (BN/2 more registers: ptxas spills)."""
        return b.wgmma.wait(total, pending=0, name=f"total_pinned{tag}")

    half = chunk_t.size
    total0, total1 = (b.frag.slice(init, offset=r * half, type=chunk_t, name=f"init{r}") for r in (0, 1))
    kit, loop_lo = cit, lo
    if hook is not None:
        peel_end = b.arith.min(b.arith.add(lo, c1, name="peel_end_rb0"), hi, name="peel_end_rb")
        zero = b.frag.splat(g.fzero, type=chunk_t, name="zero_rbp")
        carried = block_scales.scale_parts(config) if in_smem else 0
        if not in_smem:
            # loaded before the epilogue; without a k-tile the first past the scales' end: zeros
            rows_h, cols_h = scales(None, _first_k_tile(g, lo, hi), "_h")
        with b.scf.for_(lo, peel_end, c1, zero, cit, *[zero] * carried,
                        args=("kp_rb", "chunk_p", "kit_p") + tuple(f"scale_p{i}" for i in range(carried)),
                        names=["chunk_peeled", "kit_peeled"] + [f"scale_h{i}" for i in range(carried)]) as ploop:
            kp, _chunk_p, kit_p, *_scales_p = ploop
            stage = b.pipeline.wait(pipe, kit_p, name="s2_rbp")
            chunk_q = issue_block(stage, 0, "_rbp0")
            got = []
            if in_smem:
                rows_q, cols_q = scales(stage, kp, "_rbp")
                got = [rows_q[0]] + cols_q
            b.scf.yield_(chunk_q, b.arith.add(kit_p, c1, name="kit_p1_rb"), *got)
        chunk_h, kit, *first_scales = ploop.results
        if in_smem:
            row_h, cols_h = first_scales[0], first_scales[1:]
        else:
            row_h = rows_h[0]
        hook()
        chunk_h = done(chunk_h, "_rbh0")
        total0 = pinned(promote(chunk_h, row_h, cols_h, total0, "_rbh0"), "_rbh0")
        # the peeled k-tile's row block 1, from the stage it still holds (waited for again: its phase has completed)
        with b.scf.for_(lo, peel_end, c1, total1, args=("kq_rb", "total_q1"), names=["total_peeled1"]) as qloop:
            kq, total_q1 = qloop
            stage = b.pipeline.wait(pipe, cit, name="s2_rbq")
            rows_q, cols_q = scales(stage, kq, "_rbq")
            chunk = done(issue_block(stage, 1, "_rbq1", chunk_h), "_rbq1")
            b.scf.yield_(promote(chunk, rows_q[1], cols_q, total_q1, "_rbq1"))
        (total1,) = qloop.results
        any_k = b.arith.cmp(peel_end, lo, pred="gt", name="any_k_rb")
        release_previous(b, pipe, any_k, kit, c1, g.c_stages, "peeled_rb")
        loop_lo = peel_end
    with b.scf.for_(loop_lo, hi, c1, total0, total1, kit, args=("kt_rb", "total_in0", "total_in1", "kit_rb"),
                    names=["total0", "total1", "kit_done"]) as loop:
        kt, total_in0, total_in1, kit_in = loop
        if not in_smem:
            rows_k, cols_k = scales(None, kt, "_rb")
        stage = b.pipeline.wait(pipe, kit_in, name="s2_rb")
        chunk = issue_block(stage, 0, "_rb0")
        if in_smem:
            # the stage has arrived (its scales with it): ld.shared while block 0's wgmmas run
            rows_k, cols_k = scales(stage, kt, "_rb")
        chunk = done(chunk, "_rb0")
        total_out0 = pinned(promote(chunk, rows_k[0], cols_k, total_in0, "_rb0"), "_rb0")
        chunk = done(issue_block(stage, 1, "_rb1", chunk), "_rb1")
        total_out1 = promote(chunk, rows_k[1], cols_k, total_in1, "_rb1")
        b.pipeline.release(pipe, stage)
        b.scf.yield_(total_out0, total_out1, b.arith.add(kit_in, c1, name="kit_rb1"))
    total0, total1, kit_done = loop.results
    return b.frag.concat(total0, total1, type=g.acc_t, name="total_blocks"), kit_done


CHUNKS_AHEAD_UNROLL = 2   # k-tiles per trip of ``promote_chunk_ahead``'s loop: one promotion in U without own wgmmas


def promote_chunk_ahead(g, init, lo, hi, cit, valid=None, later=(), hook=None, row_reads=None):
    """``chunk_ahead`` (block scales with ``scales_smem``): each consumer warpgroup keeps two chunks, so that its own
    tensor-core queue is not empty while it promotes: k-tile j+1's wgmmas are issued into one chunk (from zero)
    before k-tile j's chunk is promoted; ``wgmma.wait {pending = 1}`` then completes k-tile j's group only, stage j
    is released (its scales were read by ld.shared right after its wgmmas were issued, before that release), and
    total += chunk_j · scale_j runs on the CUDA cores while k-tile j+1's wgmmas execute.

    No chunk is in flight across the loop's back edge: ptxas serializes every wgmma of the kernel (C7514) when a
    chunk queued in one iteration is waited for and read in the next — the wait it counts from is in another
    iteration. So the loop takes ``CHUNKS_AHEAD_UNROLL`` = U k-tiles per trip, the two chunks alternating within
    the trip (X ← kt, Y ← kt+1, promote X, X ← kt+2, promote Y, …), and waits for its last chunk with
    pending = 0 before the back edge: one promotion in U has no wgmma of its own warpgroup queued behind it (the
    other warpgroup's keep the tensor cores busy). U = 3 assembles as cleanly; U = 4 spills under setmaxnreg.
    Over k-tiles [lo, hi) — a whole tile or a stream-K piece, 0, 1 or more k-tiles:

    - with ``hook`` or ``row_reads``: k-tile lo → a chunk, a loop of at most one trip (the zero chunk and zero
      scales without a k-tile); then ``row_reads()`` (grouped, ``zero_rows_late``) and ``hook()`` (``overlap``:
      the previous tile's epilogue behind its wgmmas); it is waited for and promoted;
    - whole trips of U k-tiles, as above;
    - the k-tiles left (fewer than U), one per trip: issued, waited for (pending = 0), promoted.

    With the chunk for BN = 128: 3 × 64 f32 accumulator registers per thread (two chunks and the total).
    → (the f32 total of k-tiles lo … hi-1 from ``init`` — without grouped row zeroing, nor ``late_scales``' row
    validity —, the iteration counter after k-tile hi-1, ``row_reads()``'s value or None). E.g. k-tiles [0, 6)
    with ``hook``: 0 in flight over the hook, promote 0; X←1 Y←2 promote 1, X←3 promote 2, Y←4 promote 3, X←5
    promote 4, promote 5 — the trips (1, 2) and (3, 4), then 5 alone."""
    b, config = g.b, g.config
    c1, pipe = g.c1, g.pipe
    parts = block_scales.scale_parts(config)
    unroll = CHUNKS_AHEAD_UNROLL
    zero = b.frag.splat(g.fzero, type=g.acc_t, name="zero_a")

    def issue_from_zero(kit, kt, tag):
        chunk, stage = issue(g, zero, kit, tag, fence_inline=True)
        return chunk, stage, block_scales.stage_scale_loads(g, stage, kt, tag)

    def promote(chunk, scales, total, tag):
        if config.late_scales:
            return block_scales.promote_late(g, chunk, scales, later, total, tag)
        scale = block_scales.scale_product(g, scales, valid, later, tag)
        return b.frag.fma(chunk, scale, total, name=f"total{tag}")

    def scale_args(tag):
        return tuple(f"scale{tag}{i}" for i in range(parts))

    total, kit, loop_lo, reads = init, cit, lo, None
    if hook is not None or row_reads is not None:
        peel_end = b.arith.min(b.arith.add(lo, c1, name="peel_end_a0"), hi, name="peel_end_a")
        with b.scf.for_(lo, peel_end, c1, zero, cit, *[zero] * parts,
                        args=("kp_a", "x_p", "kit_p") + scale_args("_p"),
                        names=["x_first", "kit_first"] + [f"scale_first{i}" for i in range(parts)]) as ploop:
            kp, _x_p, kit_p, *_scales = ploop
            x_q, _s, got = issue_from_zero(kit_p, kp, "_ap")
            b.scf.yield_(x_q, b.arith.add(kit_p, c1, name="kit_p1_a"), *got)
        first, kit, *first_scales = ploop.results
        reads = row_reads() if row_reads is not None else None
        if hook is not None:
            hook()
        # a loop of at most one trip, so no branch joins the chunk in flight: it leaves the loop as it entered
        first = b.wgmma.wait(first, pending=0, name="first_done")
        any_k = b.arith.cmp(peel_end, lo, pred="gt", name="any_k_a")
        release_previous(b, pipe, any_k, kit, c1, g.c_stages, "first_a")
        total = promote(first, first_scales, total, "_ap")
        loop_lo = peel_end
    c_unroll = b.const(unroll, i32, name="chunks_unroll")
    rest = b.arith.max(b.arith.sub(hi, loop_lo, name="rest_a0"), g.c0, name="rest_a")
    trips_end = b.arith.add(loop_lo, b.arith.mul(b.arith.div(rest, c_unroll, name="trips_a"), c_unroll,
                                                 name="tripped_a"), name="trips_end_a")
    with b.scf.for_(loop_lo, trips_end, c_unroll, total, kit, args=("kt_a", "total_a", "kit_a"),
                    names=["total_trips", "kit_trips"]) as loop:
        kt, total, kit_in = loop
        chunk, stage, scales = issue_from_zero(kit_in, kt, "_a0")
        for j in range(1, unroll):
            kit_j = b.arith.add(kit_in, b.const(j, i32, name=f"kit_off{j}"), name=f"kit_a{j}")
            kt_j = b.arith.add(kt, b.const(j, i32, name=f"kt_off{j}"), name=f"kt_a{j}")
            following = issue_from_zero(kit_j, kt_j, f"_a{j}")
            done = b.wgmma.wait(chunk, pending=1, name=f"chunk_done{j - 1}")
            b.pipeline.release(pipe, stage)
            total = promote(done, scales, total, f"_a{j - 1}")
            # the promotion pinned before the next issue into the chunk's registers: a wait that completes nothing
            # (only the following chunk's group is in flight) but reads the new total, so LLVM cannot sink the
            # promotion below it — there the old and the new chunk would both be live (64 more registers)
            total = b.wgmma.wait(total, pending=1, name=f"total_pinned{j - 1}")
            chunk, stage, scales = following
        done = b.wgmma.wait(chunk, pending=0, name=f"chunk_done{unroll - 1}")
        b.pipeline.release(pipe, stage)
        total = promote(done, scales, total, f"_a{unroll - 1}")
        b.scf.yield_(total, b.arith.add(kit_in, c_unroll, name="kit_a_next"))
    total, kit = loop.results
    with b.scf.for_(trips_end, hi, c1, total, kit, args=("kt_r", "total_r", "kit_r"),
                    names=["total_rest", "kit_rest"]) as rloop:
        kt, total, kit_in = rloop
        chunk, stage, scales = issue_from_zero(kit_in, kt, "_ar")
        done = b.wgmma.wait(chunk, pending=0, name="chunk_done_r")
        b.pipeline.release(pipe, stage)
        b.scf.yield_(promote(done, scales, total, "_ar"), b.arith.add(kit_in, c1, name="kit_r1"))
    total, kit_end = rloop.results
    return total, kit_end, reads


def group_read_of(g, t, tag: str):
    """``group_ahead``: ``block_scales.group_read`` of work item ``t``'s tile row, read by the producer's thread;
    a ``t`` past the tiles reads tile 0's (the value is then never used)."""
    b = g.b
    t_safe = b.arith.select(b.arith.cmp(t, g.tiles, pred="lt", name=f"ahead_in_{tag}"), t, g.c0,
                            name=f"ahead_t_{tag}")
    tm, _tn = tile_of(g, t_safe, (f"ahead_tm_{tag}", f"ahead_tn_{tag}", f"ahead_tmc_{tag}", f"ahead_own_{tag}"))
    return block_scales.group_read(g, tm, g.thread, 384, f"ahead_{tag}")


def _first_k_tile(g, lo, hi):
    """The k-tile whose scales the overlapped first promotion loads: lo, or — no k-tile (a masked tile past its
    group's rows) — the first past the scales' end, which loads zeros, so that its zero chunk's product stays zero
    whatever those rows' scales hold."""
    b = g.b
    any_k = b.arith.cmp(hi, lo, pred="gt", name="has_k_h")
    return b.arith.select(any_k, lo, g.ktiles, name="first_kt_h")


def consume(g, ct, lo, hi, cit, hook=None):
    """The wgmmas of k-tiles lo … hi-1 of work item ct from the iteration counter cit on (``hook``: see
    ``k_tiles``); → (the f32 accumulator, completed; the counter after them; the tile's (m, n))."""
    b, config = g.b, g.config
    tm2, tn2 = tile_of(g, ct, ("tm2", "tn2", "tmc2", "tm2_own"))
    init = b.frag.splat(g.fzero, type=g.acc_t, name="init")
    if config.scales == "block":
        acc, kit_end = promote_block_scaled(g, init, lo, hi, cit, tm2, tn2, hook)
    elif config.fp8 and config.promote == 1:
        acc, kit_end = promote_every_k_tile(g, init, lo, hi, cit)
    elif config.fp8:
        # promotion: the wgmmas of `promote` k-tiles sum into a chunk that starts from zero; the finished chunk
        # joins the f32 total with ordinary adds. The two consumer warpgroups promote half a chunk apart
        # (warpgroup 1's chunks — in a moved last tile those of C's odd row blocks — start promote/2 k-tiles
        # earlier, its first one clipped at 0): while one waits for its chunk and adds it, the other's wgmmas keep
        # the tensor cores busy. With a hook the first chunk IS the total (no zero total is live while the hook
        # holds the previous tile's C; without one, a chunk loop from the first chunk on keeps BN = 224's 224
        # accumulators unspilled).
        c_promote = b.const(config.promote, i32, name="promote")
        stagger = b.arith.mul(promotion_stagger(g, tm2), b.const(config.promote // 2, i32, name="half_chunk"),
                              name="stagger")
        if hook is not None:
            chunks_from = b.arith.sub(c_promote, stagger, name="second_chunk")
            first_end = b.arith.min(chunks_from, hi, name="first_end")
            total0, kit0 = k_tiles(g, lo, first_end, init, cit, hook, "_first")
        else:
            chunks_from, total0, kit0 = b.arith.sub(lo, stagger, name="first_chunk"), init, cit
        with b.scf.for_(chunks_from, hi, c_promote, total0, kit0,
                        args=("kchunk", "total_in", "pkit"), names=["total", "kit_done"]) as ploop:
            kchunk, total_in, pkit = ploop
            kchunk_lo = b.arith.max(kchunk, lo, name="kchunk_lo")
            kchunk_end = b.arith.min(b.arith.add(kchunk, c_promote, name="kchunk_next"), hi, name="kchunk_end")
            zero = b.frag.splat(g.fzero, type=g.acc_t, name="zero")
            chunk, chunk_kit = k_tiles(g, kchunk_lo, kchunk_end, zero, pkit)
            b.scf.yield_(b.frag.add(total_in, chunk, name="total_out"), chunk_kit)
        acc, kit_end = ploop.results
    else:
        acc, kit_end = k_tiles(g, lo, hi, init, cit, hook)
    return acc, kit_end, tm2, tn2
