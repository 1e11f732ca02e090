"""The attention forward kernel of an ``AttentionConfig``, FlashAttention-3's structure in the tile IR.

One CTA per (query tile of bm = 64·w rows, query head, batch) (grid ``(cdiv(%sq, bm), Hq, B)``; causal: query tiles
in reverse order of the x index, the longest first), 1 + w warpgroups (w = ``consumer_warpgroups``, 2 or 3):

- ``gpu.roles`` gives warpgroup 0 to the PRODUCER (registers cut to 24, 32 with w = 3) whose thread 0 loads the Q
  tile once (TMA, on
  its own mbarrier) and then walks the KV tiles 0 … n_end-1 of the query tile's KV head, loading each K tile into
  the K pipeline and each V tile into the V pipeline (64-column TMA boxes of rank-4 maps over (B, H, S, D));
- the w CONSUMER warpgroups (registers raised to 240, 160 with w = 3) own 64 query rows each: per KV tile S = Q·Kᵀ by SS wgmma,
  the online softmax on S's accumulator fragment in f32, P converted to 16 bits in registers and O += P·V by RS
  wgmma (``softmax``); then O / l and the log-sum-exp (``epilogue``).

Persistent (``persistent``): min(work items, %ctas) CTAs, each walking its items (``schedule``); the producer's
``produce_items`` and the consumers' ``consume_items`` loop over them with the K/V pipelines' counter and Q's barrier
phase carried across items, Q's tile released to the next item's load through ``%qfree``.

Causal (bottom-right aligned): query row i sees key columns j ≤ i + Sk − Sq, so the KV loop of a CTA ends at the tile
holding its last row's last visible column (``n_end``; tiles entirely above the diagonal are never loaded) and only
the tiles crossing the diagonal (or the ragged last tile) run the mask (``softmax.mask_scores``).
"""
from __future__ import annotations

from ptxgen.ir.builder import KernelBuilder, cdiv, dim, f32, gtensor, i32, smem, tmap
from ptxgen.ir.ops.smem import tile_split

from ..global_element import load_element
from . import epilogue, schedule, softmax
from .config import BOX_COLUMNS, CONSUMER_ROWS, AttentionConfig
from .layouts import box_layout, p_layout, ring_box, ring_layout, tile_layout
from .warpgroups import warpgroup_tests


class AttentionValues:
    """What the parts of the kernel share while it is built: the builder ``b``, the KernelBuilder ``kb``, the
    config, the shared-memory tensors and pipelines, the block's coordinates, the constants and the loop bound."""

    kv_base = None    # persistent: the K/V pipelines' iteration of the warpgroup's first KV tile of the item
    kv_stride = None  # pack_lone: the iterations between the warpgroup's consecutive KV tiles (the item's streams)
    q_done = None     # persistent: builds the consumers' release of Q's tile (``schedule.consume_items``)


def build(config: AttentionConfig = AttentionConfig()):
    """The kernel module of ``config`` (validated first: a ValueError names the field of a broken rule).

    Dense parameters: ``%q`` (B, Hq, Sq, D), ``%k``, ``%v`` (B, Hkv, Sk, D) as TMA maps (rank 4, unit stride along
    D), ``%out`` (B, Hq, Sq, D) (a TMA map for the ``tma`` epilogue, else a gtensor) and ``%lse`` (B, Hq, Sq) f32,
    ``%sq``, ``%sk``, ``%group`` (= Hq/Hkv), ``%scale`` (the softmax scale). Varlen (``config.varlen``): ``%q``
    (Hq, total_q, D), ``%k``, ``%v`` (Hkv, total_k, D) (rank 3), ``%out`` (Hq, total_q, D), ``%lse`` (Hq, total_q),
    ``%cu_q``, ``%cu_k`` (B + 1 sequence offsets, i32), ``%max_sq`` (the grid's query tiles), ``%batches`` (B),
    ``%group``, ``%scale``. Persistent (``config.persistent``): then ``%heads``, ``%batches`` (dense; varlen has
    it), ``%ctas`` (``schedule.grid``). Post: the same IR, op for op and name for name, for the same config."""
    config.validate()
    g = AttentionValues()
    g.config = config
    dtype, d, bn, stages, bm = config.dtype, config.head_dim, config.bn, config.stages, config.bm
    g.lead = lead = 1 if config.varlen else 2
    rank = lead + 2
    q_tile = tile_layout(dtype, bm, d, lead)
    ring = ring_layout(dtype, bn, d, stages, lead)
    g.tile_bytes = bn * d * config.element_bytes
    # pack_lone loads Q's tile as one 64-row box per warpgroup (a packed item's warpgroups read different heads)
    q_box = box_layout(tile_split(q_tile, lead, CONSUMER_ROWS)[0] if config.pack_lone else q_tile, lead)
    maps = {"q": tmap(dtype, rank, q_box), "k": tmap(dtype, rank, ring_box(ring, lead)),
            "v": tmap(dtype, rank, ring_box(ring, lead))}
    # persistent: the work items' head (and, dense, batch) counts and the CTA count (the grid's host expression reads
    # them; varlen has %batches already)
    persistent = {"heads": i32, "ctas": i32} if config.persistent else {}
    if config.varlen:
        grid = schedule.grid(config) if config.persistent else (cdiv("max_sq", bm), dim("q", 0), "batches")
        kb = KernelBuilder(
            "attention_varlen_fwd", grid=grid, block=(config.threads, 1, 1), **maps,
            out=gtensor(dtype, 3), lse=gtensor("f32", 2), cu_q=gtensor("i32", 1), cu_k=gtensor("i32", 1),
            max_sq=i32, batches=i32, group=i32, scale=f32, **persistent)
    else:
        grid = schedule.grid(config) if config.persistent else (cdiv("sq", bm), dim("q", 1), dim("q", 0))
        persistent = {"heads": i32, "batches": i32, "ctas": i32} if config.persistent else {}
        if config.item_table:
            persistent.update(item_rounds=gtensor("i32", 1), item_list=gtensor("i32", 2))
        kb = KernelBuilder(
            "attention_fwd", grid=grid, block=(config.threads, 1, 1), **maps,
            out=tmap(dtype, 4, epilogue.out_box(config)) if config.epilogue == "tma" else gtensor(dtype, 4),
            lse=gtensor("f32", 3), sq=i32, sk=i32, group=i32, scale=f32, **persistent)
    g.kb, g.b = kb, kb.b
    b = kb.b
    if config.q_tiles == 2:   # two Q tiles, by item parity
        g.sq_ring = b.smem.alloc(type=smem(dtype, ring_layout(dtype, bm, d, 2, lead)), align=1024, name="sq_ring")
        g.sq_tile = None
    else:
        g.sq_tile = b.smem.alloc(type=smem(dtype, q_tile), align=1024, name="sq_tile")
    g.sk_ring = b.smem.alloc(type=smem(dtype, ring), align=1024, name="sk_ring")
    g.sv_ring = b.smem.alloc(type=smem(dtype, ring), align=1024, name="sv_ring")
    if config.p_in_smem:
        g.sp_tile = b.smem.alloc(type=smem(dtype, p_layout(dtype, bm, bn)), align=1024, name="sp_tile")
    if config.o_buffer:
        g.so_tile = b.smem.alloc(type=smem(dtype, q_tile), align=1024, name="so_tile")
    q_tiles = config.q_tiles
    g.qbar = b.mbarrier.alloc(count=q_tiles, name="qbar")
    if config.persistent:
        # Q's tile free: every consumer thread of the item arrived
        g.qfree = b.mbarrier.alloc(count=q_tiles, name="qfree")
    # every consumer warp releases each stage
    g.pk = b.pipeline.alloc(stages=stages, consumers=4 * config.consumer_warpgroups, name="pk")
    g.pv = b.pipeline.alloc(stages=stages, consumers=4 * config.consumer_warpgroups, name="pv")
    g.thread = thread = b.gpu.thread_id(dim="x", name="thread")
    g.wg = b.gpu.warpgroup_id(name="wg")
    g.c0 = c0 = b.const(0, i32, name="c0")
    g.c1 = c1 = b.const(1, i32, name="c1")
    g.c_bn = b.const(bn, i32, name="bn")
    g.c_box = b.const(BOX_COLUMNS, i32, name="box_cols")
    if config.persistent:
        schedule.rounds(g)
    else:
        if config.causal:
            # the longest query tiles (the most KV tiles under the diagonal) first: the CTAs launched last are short
            block_x = b.gpu.block_id(dim="x", name="block_x")
            last_tile = b.arith.sub(b.gpu.grid_dim(dim="x", name="m_tiles"), c1, name="last_m_tile")
            g.m_tile = b.arith.sub(last_tile, block_x, name="m_tile")
        else:
            g.m_tile = b.gpu.block_id(dim="x", name="m_tile")
        g.head = b.gpu.block_id(dim="y", name="head")
        g.batch = b.gpu.block_id(dim="z", name="batch")
        item_rows(g)
    leader = b.arith.cmp(thread, c0, pred="eq", name="leader")
    with b.scf.if_(leader).then:
        for index in (c0, c1)[:q_tiles]:
            b.mbarrier.init(g.qbar, index, arrivals=1)
            if config.persistent:
                b.mbarrier.init(g.qfree, index, arrivals=128 * config.consumer_warpgroups)
        b.pipeline.init(g.pk)
        b.pipeline.init(g.pv)
        b.fence.mbarrier_init()
        b.scf.yield_()
    b.barrier.cta()

    producer_registers, consumer_registers = config.register_budgets
    role = b.roles(producer=(1, producer_registers), consumer=(config.consumer_warpgroups, consumer_registers))
    with role["producer"]:
        with b.scf.if_(leader).then:
            if config.persistent:
                produce_items(g)
            else:
                produce(g)
            b.scf.yield_()
    with role["consumer"]:
        g.cw = b.arith.sub(g.wg, c1, name="cw")
        warpgroup_tests(g)
        g.lt = b.arith.rem(thread, b.const(128, i32, name="wgsize"), name="lt")
        if config.persistent:
            consume_items(g)
        else:
            g.row0 = b.arith.add(g.q0, b.arith.mul(g.cw, b.const(CONSUMER_ROWS, i32, name="rows"), name="row_off"),
                                 name="row0")
            o, m, l = softmax.consume(g)
            epilogue.store(g, o, m, l)
    return kb.module("ptxgen/kernels/attention")


def item_rows(g, tag: str = "", c_bm=None) -> None:
    """The work item's values derived from ``g.m_tile``, ``g.head`` and ``g.batch``: its KV head ``g.kv_head``, its
    first query row ``g.q0`` (m_tile·bm; ``align_bottom``: ``bottom_aligned_rows``, and ``g.row_limit``), its
    sequences' bounds (``sequence_bounds``) and its KV tile count ``g.n_end``; the
    names carry ``tag`` (the persistent kernel's roles each compute them: ``"_p"``, ``"_c"``)."""
    b = g.b
    g.kv_head = b.arith.div(g.head, g.kb["group"], name=f"kv_head{tag}")
    if c_bm is None:
        c_bm = b.const(g.config.bm, i32, name="bm")
    if g.config.align_bottom:
        sequence_bounds(g, tag)
        bottom_aligned_rows(g, c_bm, tag)
    else:
        g.q0 = b.arith.mul(g.m_tile, c_bm, name=f"q0{tag}")
        sequence_bounds(g, tag)
    g.n_end = kv_tiles(g, tag)


def bottom_aligned_rows(g, c_bm, tag: str) -> None:
    """``align_bottom``: the item's rows [``g.q0``, ``g.row_limit``). The rows ⌈Sq/bm⌉·bm − Sq the tiling leaves over,
    in whole warpgroups (shift = 64·⌊that / 64⌋), come off the first tile: tile 0 holds rows [0, bm − shift), tile
    m ≥ 1 rows [m·bm − shift, (m + 1)·bm − shift) ∩ [0, Sq). Sq = 1024, bm = 192: shift 128, tile 0 rows 0 … 63
    (its warpgroups 1 and 2 have none), tile 5 rows 832 … 1023. No coordinate is negative (a TMA store at a negative
    row is an illegal instruction on the H100)."""
    b = g.b
    rows = b.const(CONSUMER_ROWS, i32, name=f"wg_rows_bottom{tag}")
    tiles_m = b.arith.cdiv(g.sq, c_bm, name=f"tiles_m{tag}")
    left_over = b.arith.sub(b.arith.mul(tiles_m, c_bm, name=f"tiled_rows{tag}"), g.sq, name=f"left_over{tag}")
    shift = b.arith.mul(b.arith.div(left_over, rows, name=f"left_over_wgs{tag}"), rows, name=f"shift{tag}")
    top = b.arith.sub(b.arith.mul(g.m_tile, c_bm, name=f"tile_rows{tag}"), shift, name=f"shifted_q0{tag}")
    first = b.arith.cmp(g.m_tile, g.c0, pred="eq", name=f"first_tile{tag}")
    g.q0 = b.arith.select(first, g.c0, top, name=f"q0{tag}")
    end = b.arith.select(first, b.arith.sub(c_bm, shift, name=f"first_rows{tag}"),
                         b.arith.add(top, c_bm, name=f"shifted_end{tag}"), name=f"tile_end{tag}")
    g.row_limit = b.arith.min(end, g.sq, name=f"row_limit{tag}")


def sequence_bounds(g, tag: str = "") -> None:
    """The CTA's sequence lengths ``g.sq``, ``g.sk`` and (varlen) the first rows ``g.q_start``, ``g.k_start`` of its
    batch's sequences in the packed tensors: ``cu[batch]`` and ``cu[batch + 1] − cu[batch]`` (``load_element``)."""
    b, kb = g.b, g.kb
    if not g.config.varlen:
        g.sq, g.sk = kb["sq"], kb["sk"]
        return
    next_batch = b.arith.add(g.batch, g.c1, name=f"next_batch{tag}")
    g.q_start = load_element(b, kb["cu_q"], (g.batch,), g.c0, 1, name=f"q_start{tag}")
    g.k_start = load_element(b, kb["cu_k"], (g.batch,), g.c0, 1, name=f"k_start{tag}")
    g.sq = b.arith.sub(load_element(b, kb["cu_q"], (next_batch,), g.c0, 1, name=f"q_stop{tag}"), g.q_start,
                       name=f"sq{tag}")
    g.sk = b.arith.sub(load_element(b, kb["cu_k"], (next_batch,), g.c0, 1, name=f"k_stop{tag}"), g.k_start,
                       name=f"sk{tag}")


def kv_tiles(g, tag: str = ""):
    """The KV tiles the CTA's query rows see: all ⌈Sk/bn⌉, or (causal) those up to the one holding the last query
    row's last visible key column min(q0 + bm, Sq) − 1 + Sk − Sq (none when that is negative)."""
    b = g.b
    tiles = b.arith.cdiv(g.sk, g.c_bn, name=f"kv_tiles{tag}")
    if g.config.causal:
        if g.config.align_bottom:
            rows_end = g.row_limit
        else:
            rows_end = b.arith.min(b.arith.add(g.q0, b.const(g.config.bm, i32, name=f"bm_end{tag}"),
                                               name=f"q_end0{tag}"), g.sq, name=f"q_end{tag}")
        g.diag_shift = b.arith.sub(g.sk, g.sq, name=f"diag_shift{tag}")
        visible = b.arith.max(b.arith.add(rows_end, g.diag_shift, name=f"visible0{tag}"), g.c0, name=f"visible{tag}")
        tiles = b.arith.min(tiles, b.arith.cdiv(visible, g.c_bn, name=f"causal_tiles{tag}"), name=f"seen_tiles{tag}")
    if not g.config.varlen:
        return tiles
    # the grid covers the longest sequence: a CTA past its own sequence's rows computes nothing
    has_rows = b.arith.cmp(g.q0, g.sq, pred="lt", name=f"has_rows{tag}")
    return b.arith.select(has_rows, tiles, g.c0, name=f"n_end{tag}")


def load_tile(g, tmap_v, dst, bars, index, head, row, tag: str, batch=None):
    """The TMA loads of one (rows, D) tile into ``dst`` (a (1, …, rows, D) view) from ``batch`` (default the item's):
    one box per 64 columns (values named ``…_{tag}{j}``; a tag starting with ``q`` loads Q's rows, any other K's or
    V's). Varlen boxes past the sequence read the next sequence's rows: the masks and the stores' row bounds keep
    them out of the result."""
    b = g.b
    batch = g.batch if batch is None else batch
    if g.config.varlen:
        row = b.arith.add(g.q_start if tag.startswith("q") else g.k_start, row, name=f"{tag}_packed_row")
    for j in range(g.config.head_dim // BOX_COLUMNS):
        cj = b.const(j, i32, name=f"{tag}_block{j}")
        box = b.smem.tile(dst, cj, mode=g.lead + 1, size=BOX_COLUMNS, name=f"{tag}_box{j}")
        col = b.arith.mul(cj, g.c_box, name=f"{tag}_col{j}")
        coords = [head, row, col] if g.config.varlen else [batch, head, row, col]
        b.tma.load(tmap_v, box, bars, index, *coords)


def produce(g):
    """Thread 0 of the producer: Q once, then K and V of every KV tile through their pipelines."""
    b, kb, config = g.b, g.kb, g.config
    q_bytes = config.bm * config.head_dim * config.element_bytes
    b.mbarrier.arrive_expect_tx(g.qbar, g.c0, bytes=q_bytes)
    load_tile(g, kb["q"], g.sq_tile, g.qbar, g.c0, g.head, g.q0, "q")
    with b.scf.for_(g.c0, g.n_end, g.c1, args=("kt",)) as (kt,):
        k0 = b.arith.mul(kt, g.c_bn, name="k0")
        ks = b.pipeline.acquire(g.pk, kt, bytes=g.tile_bytes, name="ks")
        load_tile(g, kb["k"], b.smem.slice(g.sk_ring, ks, name="k_dst"), g.pk, ks, g.kv_head, k0, "k")
        vs = b.pipeline.acquire(g.pv, kt, bytes=g.tile_bytes, name="vs")
        load_tile(g, kb["v"], b.smem.slice(g.sv_ring, vs, name="v_dst"), g.pv, vs, g.kv_head, k0, "v")
        b.scf.yield_()


def load_kv(g, iteration, kt, tag: str, kv_head=None, batch=None) -> None:
    """The persistent producer's loads of KV tile ``kt`` of ``kv_head`` in ``batch`` (default the item's) at
    pipeline ``iteration``: K into the K ring, V into the V ring (values named ``k{tag}…``, ``v{tag}…``)."""
    b, kb = g.b, g.kb
    kv_head = g.kv_head if kv_head is None else kv_head
    k0 = b.arith.mul(kt, g.c_bn, name=f"kv_row{tag}")
    ks = b.pipeline.acquire(g.pk, iteration, bytes=g.tile_bytes, name=f"ks{tag}")
    load_tile(g, kb["k"], b.smem.slice(g.sk_ring, ks, name=f"k_dst{tag}"), g.pk, ks, kv_head, k0, f"k{tag}", batch)
    vs = b.pipeline.acquire(g.pv, iteration, bytes=g.tile_bytes, name=f"vs{tag}")
    load_tile(g, kb["v"], b.smem.slice(g.sv_ring, vs, name=f"v_dst{tag}"), g.pv, vs, kv_head, k0, f"v{tag}", batch)


def stream_coords(g, v: int, tag: str) -> tuple:
    """``pack_lone``: (head, batch, KV head) of the item's stream v (a packed item's pair first_pair + v, clamped to
    its last stream; an unpacked item has one stream, its own pair)."""
    b = g.b
    last = b.arith.sub(g.streams, g.c1, name=f"last_stream{v}{tag}")
    pair = b.arith.add(g.first_pair, b.arith.min(b.const(v, i32, name=f"stream{v}{tag}"), last,
                                                 name=f"stream_index{v}{tag}"), name=f"stream_pair{v}{tag}")
    head, batch = schedule.pair_coords(g, pair, f"{v}{tag}")
    return head, batch, b.arith.div(head, g.kb["group"], name=f"stream_kv_head{v}{tag}")


def load_round(g, it, kt, tag: str, first: bool = False) -> None:
    """The producer's loads of the item's KV tile ``kt`` (``first``: tile 0, ``kt`` = 0): with ``pack_lone`` one per
    stream v < streams, at iteration it + streams·kt + v; else the item's own at it + kt (tile 0's at it itself)."""
    b, config = g.b, g.config
    if not config.pack_lone:
        load_kv(g, it if first else b.arith.add(it, kt, name=f"p_iteration{tag}"), kt, tag)
        return
    round_start = b.arith.add(it, b.arith.mul(g.streams, kt, name=f"p_round_offset{tag}"), name=f"p_round_it{tag}")
    for v in range(config.consumer_warpgroups):
        cv = b.const(v, i32, name=f"p_stream{v}{tag}")
        head, batch, kv_head = stream_coords(g, v, f"_p{tag}")
        with b.scf.if_(b.arith.cmp(cv, g.streams, pred="lt", name=f"p_has_stream{v}{tag}")).then:
            load_kv(g, b.arith.add(round_start, cv, name=f"p_iteration{v}{tag}"), kt, f"{tag}_s{v}", kv_head, batch)
            b.scf.yield_()


def load_q(g) -> None:
    """Q's tile of the item: one box of bm rows; ``pack_lone``: one 64-row box per warpgroup v, of stream v's head
    at the lone tile's first row (packed) or of the item's head at row q0 + 64·v."""
    b, kb, config = g.b, g.kb, g.config
    if not config.pack_lone:
        load_tile(g, kb["q"], g.sq_tile, g.qbar, g.q_slot, g.head, g.q0, "q")
        return
    rows = b.const(CONSUMER_ROWS, i32, name="q_box_rows")
    for v in range(config.consumer_warpgroups):
        cv = b.const(v, i32, name=f"q_part{v}")
        head, batch, _ = stream_coords(g, v, "_q")
        row = b.arith.add(g.q0, b.arith.select(g.packed, g.c0, b.arith.mul(cv, rows, name=f"q_part_row{v}"),
                                               name=f"q_part_offset{v}"), name=f"q_row{v}")
        dst = b.smem.tile(g.sq_tile, cv, mode=g.lead, size=CONSUMER_ROWS, name=f"q_part_dst{v}")
        load_tile(g, kb["q"], dst, g.qbar, g.q_slot, head, row, f"q{v}", batch)


def produce_items(g):
    """Thread 0 of the persistent producer, per work item (``schedule.work_item``): K and V of its first KV tile
    (they only need free stages, so they load while the consumers still finish the previous item), then — once the
    consumers released Q's tile (``%qfree``'s phase of the previous item) — Q, then K and V of the other KV tiles.
    The pipelines' iteration counter runs on across items (``pack_lone``: a packed item's tiles of its streams
    interleaved, ``load_round``)."""
    b, config = g.b, g.config
    c0, c1 = g.c0, g.c1
    q_bytes = config.bm * config.head_dim * config.element_bytes
    with b.scf.for_(c0, g.rounds, c1, c0, args=("p_round", "p_it"), names=["p_it_done"]) as (r, it):
        schedule.work_item(g, r, "_p")
        item_rows(g, "_p", g.c_bm)
        with b.scf.if_(b.arith.cmp(g.n_end, c0, pred="gt", name="p_any_tile")).then:
            load_round(g, it, c0, "_first", first=True)
            b.scf.yield_()
        if config.q_tiles == 2:
            # Q's two tiles by item parity: tile r mod 2 is free once item r − 2's consumers released it
            g.q_slot = b.arith.rem(r, g.c2, name="p_q_slot")
            g.sq_tile = b.smem.slice(g.sq_ring, g.q_slot, name="p_q_tile")
            with b.scf.if_(b.arith.cmp(r, g.c2, pred="ge", name="p_after_second")).then:
                b.mbarrier.wait(g.qfree, g.q_slot, b.arith.rem(b.arith.sub(b.arith.div(r, g.c2, name="p_q_use"), c1,
                                                                           name="p_q_prev_use"), g.c2,
                                                               name="p_qfree_parity"))
                b.scf.yield_()
        else:
            g.q_slot = c0
            with b.scf.if_(b.arith.cmp(r, c0, pred="gt", name="p_after_first")).then:
                b.mbarrier.wait(g.qfree, c0, b.arith.rem(b.arith.sub(r, c1, name="p_prev_round"), g.c2,
                                                         name="p_qfree_parity"))
                b.scf.yield_()
        b.mbarrier.arrive_expect_tx(g.qbar, g.q_slot, bytes=q_bytes)
        load_q(g)
        with b.scf.for_(c1, g.n_end, c1, args=("p_kt",)) as (kt,):
            load_round(g, it, kt, "")
            b.scf.yield_()
        iterations = b.arith.mul(g.streams, g.n_end, name="p_item_its") if config.pack_lone else g.n_end
        b.scf.yield_(b.arith.add(it, iterations, name="p_it_next"))


def item_q_tile(g, r):
    """``q_tiles`` = 2, the consumers of round ``r``: Q's tile r mod 2 (``g.sq_tile``, ``g.q_rows``), waited for
    (its barrier's use r / 2); → the tile's index."""
    b = g.b
    slot = b.arith.rem(r, g.c2, name="q_slot")
    g.sq_tile = b.smem.slice(g.sq_ring, slot, name="q_tile")
    softmax.query_rows(g)
    b.mbarrier.wait(g.qbar, slot, b.arith.rem(b.arith.div(r, g.c2, name="q_use"), g.c2, name="q_parity"))
    return slot


def own_stream(g, it, row_off):
    """``pack_lone``, the consumer warpgroup v's part of its item: in a packed item with a stream v, that stream's
    head and batch (``g.head``, ``g.batch``), its rows from the lone tile's first (→ the row offset 0 instead of
    ``row_off``) and its KV tiles at iterations it + v + streams·j (``g.kv_base``, ``g.kv_stride``); a packed item's
    warpgroup past its streams keeps its rows past Sq, so it computes and stores nothing (``softmax.own_tiles``, the
    stores' bounds); an unpacked item as without packing (``g.kv_stride`` = 1). Sets ``g.kv_item`` (it) and
    ``g.kv_offset`` (v packed, else 0) for the releases of the other streams' stages (``softmax.release_round``).
    → the warpgroup's row offset in the item."""
    b = g.b
    has_stream = b.arith.and_(g.packed, b.arith.cmp(g.cw, g.streams, pred="lt", name="cw_has_stream"),
                              name="packed_stream")
    pair = b.arith.add(g.first_pair, b.arith.select(has_stream, g.cw, g.c0, name="own_pair_offset"), name="own_pair")
    g.head, g.batch = schedule.pair_coords(g, pair, "_own")
    g.kv_item = it
    g.kv_offset = b.arith.select(g.packed, g.cw, g.c0, name="kv_offset")
    g.kv_base = b.arith.add(it, g.kv_offset, name="kv_base")
    g.kv_stride = g.streams
    return b.arith.select(has_stream, g.c0, row_off, name="own_row_off")


def consume_items(g):
    """The persistent consumer warpgroup, per work item: its rows, Q's phase of the item (parity round mod 2), the KV
    loop with the pipelines' iteration counter carried on (``g.kv_base``), the epilogue; it releases Q's tile
    (``%qfree``, every consumer thread arriving) once the item's last S = Q·Kᵀ completed where O is not staged in
    Q's tile (``o_buffer`` or the ``direct`` epilogue), else after the epilogue's stores have read it.
    ``continuous_turns``: the ping-pong's ring starts before the first item and is drained after the last
    (``softmax.pingpong_turn``), so warpgroup 0 may queue item i+1's first S = Q·Kᵀ while the last warpgroup is still
    in item i's softmax tail or epilogue. That S reads item i+1's Q, which the producer loads only after every
    consumer thread released item i's (``%qfree``: after the epilogue where O is staged in Q's tile), so no staging of
    O in Q's tile is overwritten; the K/V stages are waited on by iteration as before (each warpgroup consumes every
    iteration in order, so its waits never alias a phase)."""
    b, config = g.b, g.config
    c0, c1 = g.c0, g.c1
    softmax.setup(g)
    early = config.o_buffer or config.epilogue == "direct"

    def release_q():
        b.mbarrier.arrive(g.qfree, g.q_slot)

    if config.continuous_turns:
        softmax.pingpong_turn(g, "start")   # once: the ring runs on across the items
    with b.scf.for_(c0, g.rounds, c1, c0, args=("c_round", "c_it"), names=["c_it_done"]) as (r, it):
        schedule.work_item(g, r, "_c")
        item_rows(g, "_c", g.c_bm)
        row_off = b.arith.mul(g.cw, b.const(CONSUMER_ROWS, i32, name="rows"), name="row_off")
        g.kv_base = it
        if config.pack_lone:
            row_off = own_stream(g, it, row_off)
        g.row0 = b.arith.add(g.q0, row_off, name="row0")
        g.q_done = release_q if early else None
        if config.q_tiles == 2:
            g.q_slot = item_q_tile(g, r)
        else:
            g.q_slot = c0
            softmax.wait_q(g, b.arith.rem(r, g.c2, name="q_parity"))
        o, m, l = softmax.mainloop(g)
        epilogue.store(g, o, m, l)
        if not early:
            release_q()
        iterations = b.arith.mul(g.streams, g.n_end, name="c_item_its") if config.pack_lone else g.n_end
        b.scf.yield_(b.arith.add(it, iterations, name="c_it_next"))
    if config.continuous_turns:
        softmax.pingpong_turn(g, "drain")   # the last warpgroup's hand-over after the CTA's last section
    if epilogue.deferred_store_wait(config):
        epilogue.await_stores_read(g, "_end")   # the CTA's shared memory outlives its last TMA stores' reads
