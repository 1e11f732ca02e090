"""The consumers' epilogue: O / l converted to the output type and stored, and the rows' log-sum-exp.

O is stored from the registers through the accumulator's TV layout (``direct``: rows past Sq skipped by the store's
bounds), or staged by stmatrix in the warpgroup's rows of Q's tile and stored by TMA (``tma``) or by rows, each
thread's store predicated on its row lying in the sequence (``rows``: varlen's).
lse = m·scale + ln l (natural log, f32) is written once per row by the first thread of each quad (the 4 threads
sharing a row): its values 0 and 2 are rows r and r + 8 of the warpgroup's 64 (``accumulator_tv``: row = 16·warp +
lane/4 + 8·((v/2) mod 2)). A row no key is visible to (causal with Sq > Sk: query rows above the first key) has
l = 0: its O is 0 (O / max(l, 1)) and its lse +inf (FlashAttention's convention), without a branch:
rsqrt(min(l, 1)) − 2^100 is +inf for l = 0 and 1 − 2^100 (below any lse) for l ≥ 1 — and l ≥ 1 for every row that
sees a key, since its maximum contributes exp2(0) = 1. No division: ``div.rn.f32`` is a subroutine call in ptxas,
which would serialize every wgmma of the kernel.
"""
from __future__ import annotations

import layoutc as lc
from layoutc.hopper import accumulator_tv

from ptxgen.ir.builder import frag, i32
from ptxgen.ir.ops.smem import tile_split

from .config import BOX_COLUMNS, CONSUMER_ROWS
from .layouts import operand_view, tile_layout
from .warpgroups import warpgroup_barrier

NO_LSE = 2.0 ** 100


def quad_row_tv():
    """The TV layout of a quad leader's one value (row r = 16·warp + lane/4) over the warpgroup's 64 rows, thread
    ``lt / 4``: ``((8,4),1):((1,16),0)``. Post: a bijection of 32 quads onto rows {16w + i : i < 8}."""
    return lc.Layout(((8, 4), 1), ((1, 16), 0))


def out_box(config):
    """The TMA box of the ``tma`` epilogue's stores: 64 rows × 64 columns of a warpgroup's part of Q's tile."""
    return tile_split(tile_split(tile_layout(config.dtype, config.bm, config.head_dim), 2, CONSUMER_ROWS)[0], 3,
                      BOX_COLUMNS)[0]


def staged_rows(g):
    """The warpgroup's 64 rows of the tile O is staged in, as the (64, D) view stmatrix writes: its rows of Q's tile
    (Q is no longer read: every wgmma retired), or of O's own tile (``o_buffer``)."""
    if not g.config.o_buffer:
        return g.q_rows
    b = g.b
    return b.smem.tile(operand_view(b, g.so_tile, (0, 1), "o_mk", g.lead), g.cw, mode=0, size=CONSUMER_ROWS,
                       name="o_stage_rows")


def stage_blocks(g, rows, o16_blocks):
    """stmatrix O's 16-bit column blocks into the warpgroup's staging ``rows`` (``staged_rows``): block j at columns
    j·o_block … A persistent kernel's staging in O's own tile first waits at the warpgroup's barrier for its first
    thread, which saw the previous item's TMA stores read the tile (``tma.store_wait``)."""
    b, config = g.b, g.config
    ob = config.o_block
    if deferred_store_wait(config):
        await_stores_read(g, "_staging")
        warpgroup_barrier(g)
    elif config.persistent and config.o_buffer:
        warpgroup_barrier(g)
    for j, block in enumerate(o16_blocks):
        view = rows if len(o16_blocks) == 1 else b.smem.tile(rows, b.const(j, i32, name=f"o_cols{j}"), mode=1,
                                                             size=ob, name=f"o_stage{j}")
        b.smem.stmatrix(view, g.lt, block, tv=accumulator_tv(ob), num=4, trans=False)


def deferred_store_wait(config) -> bool:
    """Whether the ``tma`` epilogue's first thread waits for its stores' smem reads only before the tile is staged
    again (``stage_blocks``) and once after the CTA's last item (``await_stores_read``), not right after issuing
    them: a persistent CTA with O's own tile, where nothing else writes that tile, so the warpgroup's next item
    starts while the TMA unit still reads this one's O."""
    return config.epilogue == "tma" and config.persistent and config.o_buffer


def await_stores_read(g, tag: str) -> None:
    """The warpgroup's first thread (the one that issued its TMA stores) waits until they have read shared memory."""
    b = g.b
    with b.scf.if_(b.arith.cmp(g.lt, g.c0, pred="eq", name=f"store_issuer{tag}")).then:
        b.tma.store_wait(pending=0, read=True)
        b.scf.yield_()


def store_through_smem(g, o16_blocks):
    """The ``tma`` epilogue: O staged in the warpgroup's rows of Q's (or O's own) tile (``stage_blocks``), made
    visible to the async proxy, then stored by its first thread as 64 × 64 TMA boxes; rows past Sq are clipped by
    TMA. The thread waits until the stores have read shared memory (the CTA must not end before; a persistent CTA's
    next Q or O must not overwrite them): right after them, or (``deferred_store_wait``) before the next staging and
    at the CTA's end."""
    b, kb, config = g.b, g.kb, g.config
    d = config.head_dim
    stage_blocks(g, staged_rows(g), o16_blocks)
    b.fence.proxy_async()   # the generic smem writes before the async-proxy (TMA) reads
    warpgroup_barrier(g)
    tile = g.so_tile if config.o_buffer else g.sq_tile
    rows = b.smem.tile(tile, g.cw, mode=g.lead, size=CONSUMER_ROWS, name="o_rows")
    with b.scf.if_(b.arith.cmp(g.lt, g.c0, pred="eq", name="wg_leader")).then:
        for j in range(d // BOX_COLUMNS):
            cj = b.const(j, i32, name=f"o_block{j}")
            box = b.smem.tile(rows, cj, mode=g.lead + 1, size=BOX_COLUMNS, name=f"o_box{j}")
            b.tma.store(kb["out"], box, g.batch, g.head, g.row0, b.arith.mul(cj, g.c_box, name=f"o_col{j}"))
        b.tma.store_commit()
        if not deferred_store_wait(config):
            b.tma.store_wait(pending=0, read=True)
        b.scf.yield_()
def row_tv(head_dim: int):
    """The ``rows`` epilogue's TV layout of a warpgroup's (64, D) tile: thread t holds half t % 2 of row t / 2 (D/2
    consecutive columns), so each thread's values share one row and one predicate. ``row_tv(64)`` =
    ``((2,64),32):((2048,1),64)``; post: a bijection of 128 threads × D/2 values onto the tile."""
    return lc.Layout(((2, CONSUMER_ROWS), head_dim // 2), ((CONSUMER_ROWS * head_dim // 2, 1), CONSUMER_ROWS))


def store_rows(g, o16_blocks):
    """The ``rows`` epilogue (varlen's): O staged by stmatrix in the warpgroup's rows of Q's (or O's own) tile, read
    back by rows (``row_tv``), and stored by each thread only if its row lies inside its sequence — a packed varlen
    tensor's next rows belong to the next sequence, which no tensor bound protects."""
    b, kb, config = g.b, g.kb, g.config
    d = config.head_dim
    staging = staged_rows(g)
    stage_blocks(g, staging, o16_blocks)
    if config.persistent and not config.o_buffer:
        b.fence.proxy_async()   # the next item's Q lands on these bytes by TMA (the async proxy)
    warpgroup_barrier(g)
    rows = b.smem.load(staging, g.lt, tv=row_tv(d), type=frag(config.dtype, d // 2), name="o_by_rows")
    my_row = b.arith.add(g.row0, b.arith.div(g.lt, b.const(2, i32, name="c2"), name="lt_half"), name="o_row")
    inside = b.arith.cmp(my_row, g.sq, pred="lt", name="o_row_inside")
    with b.scf.if_(inside).then:
        if config.varlen:
            start = b.arith.add(g.q_start, g.row0, name="out_row0")
            tile = b.gmem.tile(kb["out"], g.head, start, g.c0, shape=(1, CONSUMER_ROWS, d), name="out_tile")
        else:
            tile = b.gmem.tile(kb["out"], g.batch, g.head, g.row0, g.c0, shape=(1, 1, CONSUMER_ROWS, d),
                               name="out_tile")
        b.gmem.store(tile, g.lt, rows, tv=row_tv(d))
        b.scf.yield_()


def store(g, o_blocks, m, l):
    """Store O / l (O in column blocks of o_block columns) and lse for the warpgroup's 64 rows; ``align_bottom``:
    only where they are the item's (``row0`` below ``g.row_limit``: the first tile's warpgroups past its rows hold
    the next tile's rows, which that tile's CTA stores)."""
    if not g.config.align_bottom:
        store_rows_of(g, o_blocks, m, l)
        return
    b = g.b
    with b.scf.if_(b.arith.cmp(g.row0, g.row_limit, pred="lt", name="own_rows")).then:
        store_rows_of(g, o_blocks, m, l)
        b.scf.yield_()


def store_rows_of(g, o_blocks, m, l):
    """``store``'s stores of O / l and lse for the warpgroup's 64 rows."""
    b, kb, config = g.b, g.kb, g.config
    ob = config.o_block
    o_t = frag("f32", ob // 2)
    count = len(o_blocks)
    names = ([""] if count == 1 else [f"_{j}" for j in range(count)])
    # 1/l as rsqrt(l)² (rsqrt.approx, ≈ 2^-22 relative): div.rn.f32 is a subroutine call in ptxas, and a call in the
    # kernel makes ptxas serialize every wgmma (C7509)
    root = b.frag.rsqrt(b.frag.max(l, 1.0, name="l_one"), name="l_rsqrt")
    inv_l = b.frag.mul(root, root, name="inv_l")
    inv_o = inv_l if ob == config.bn else b.frag.slice(inv_l, offset=0, type=o_t, name="inv_l_o")
    o16 = [b.frag.cast(b.frag.mul(o, inv_o, name=f"o_norm{n}"), type=frag(config.dtype, ob // 2), name=f"o16{n}")
           for o, n in zip(o_blocks, names)]
    if config.epilogue == "tma":
        store_through_smem(g, o16)
    elif config.epilogue == "rows":
        store_rows(g, o16)
    else:
        for j, (block, n) in enumerate(zip(o16, names)):
            col = g.c0 if count == 1 else b.const(j * ob, i32, name=f"out_col{n}")
            out_tile = b.gmem.tile(kb["out"], g.batch, g.head, g.row0, col, shape=(1, 1, CONSUMER_ROWS, ob),
                                   name=f"out_tile{n}")
            b.gmem.store(out_tile, g.lt, block, tv=accumulator_tv(ob))

    lse_real = b.frag.fma(m, kb["scale"], b.frag.log(l, name="log_l"), name="lse_real")
    empty = b.frag.sub(b.frag.rsqrt(b.frag.min(l, 1.0, name="l_min1"), name="l_min1_rsqrt"), NO_LSE,
                       name="empty_row")
    lse = b.frag.max(lse_real, empty, name="lse_rows")
    one_t = frag("f32", 1)
    halves = (b.frag.slice(lse, offset=0, type=one_t, name="lse_upper"),
              b.frag.slice(lse, offset=2, type=one_t, name="lse_lower"))
    c4 = b.const(4, i32, name="quad")
    quad_leader = b.arith.cmp(b.arith.rem(g.lt, c4, name="quad_lane"), g.c0, pred="eq", name="quad_leader")
    quad = b.arith.div(g.lt, c4, name="quad_index")
    c8 = b.const(8, i32, name="c8")
    if not config.varlen:
        with b.scf.if_(quad_leader).then:
            for h, values in enumerate(halves):
                first = g.row0 if h == 0 else b.arith.add(g.row0, c8, name="row8")
                tile = b.gmem.tile(kb["lse"], g.batch, g.head, first, shape=(1, 1, CONSUMER_ROWS),
                                   name=f"lse_tile{h}")
                b.gmem.store(tile, quad, values, tv=quad_row_tv())
            b.scf.yield_()
        return
    # varlen: each row stored only inside its sequence (row r = 16·warp + lane/4 of the quad, and r + 8)
    local = b.arith.add(b.arith.rem(quad, c8, name="quad_row0"),
                        b.arith.mul(b.arith.div(quad, c8, name="quad_warp"), b.const(16, i32, name="c16"),
                                    name="quad_warp_rows"), name="quad_row")
    for h, values in enumerate(halves):
        first = g.row0 if h == 0 else b.arith.add(g.row0, c8, name="row8")
        row = b.arith.add(first, local, name=f"lse_row{h}")
        keep = b.arith.and_(quad_leader, b.arith.cmp(row, g.sq, pred="lt", name=f"lse_inside{h}"),
                            name=f"lse_store{h}")
        with b.scf.if_(keep).then:
            start = b.arith.add(g.q_start, first, name=f"lse_row0_{h}")
            tile = b.gmem.tile(kb["lse"], g.head, start, shape=(1, CONSUMER_ROWS), name=f"lse_tile{h}")
            b.gmem.store(tile, quad, values, tv=quad_row_tv())
            b.scf.yield_()
