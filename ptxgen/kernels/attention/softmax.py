"""The consumers' mainloop: per KV tile, S = Q·Kᵀ (SS wgmma), the online softmax on S's f32 accumulator fragment, and
O += P·V with P in registers (RS wgmma).

The row statistics are fragments of S's shape whose values all equal their row's statistic (``frag.reduce``
broadcasts a row's result to every value of the row): the running max m (in score units), the running sum l. Per tile:

    m' = max(m, rowmax(S))                      (frag.reduce over the 4 threads of a row's quad)
    P  = exp2(S·c − m'·c)                       (c = scale·log2 e: one FMA per value, then ex2)
    α  = exp2(m·c − m'·c)                       (the rescale of what was summed under the old max)
    l' = l·α + rowsum(P),  O' = O·α + P·V

m starts at −2^100 instead of −inf, so a row whose scores so far are all masked keeps m' finite: its P is
exp2(−inf) = 0 and its α is 1, never the NaN of −inf − (−inf). P's 16-bit fragment is the RS A operand as it is:
the accumulator of m64nNk16 and the A fragment of the (64, N) P tile place each (row, column) in the same thread
and value (``accumulator_tv(N)`` = ``rs_a_tv(T, 64, N)``, asserted in tests/ptxgen/test_attention.py), so the
conversion moves no data. O is kept in column blocks of o_block = min(D, N) columns (D = 256 with N = 64: four
m64n64 accumulators); a block's o_block/2 values are a prefix of S's N/2 value order: a value's row depends only on
its index mod 4, so O takes the statistics as ``frag.slice``s.
"""
from __future__ import annotations

import math

from layoutc.hopper import accumulator_tv

from ptxgen.ir.builder import f32, frag, i32
from ptxgen.ir.text import TupleAttr

from .config import CONSUMER_ROWS
from .layouts import operand_view
from .warpgroups import by_warpgroup, warpgroup_barrier

M_INIT = -2.0 ** 100    # the running max before any score: finite, far below any score


def score_layout(config):
    """(the TV layout of a consumer's S = (64, bn) accumulator, the tile shape)."""
    return accumulator_tv(config.bn), (CONSUMER_ROWS, config.bn)


def mask_scores(g, s, k0, tag: str = ""):
    """S with the key columns past Sk and (causal) the query-key pairs above the diagonal set to −inf — each mask
    only on the tiles that need it (``scf.if``): the key bound on the ragged last tile, the diagonal (causal) on the
    tiles crossing it. Both are ``frag.mask_past`` (a bit test and a select per value)."""
    b, config = g.b, g.config
    bound = b.arith.sub(g.sk, k0, name=f"col_bound{tag}")
    ragged = b.arith.cmp(bound, g.c_bn, pred="lt", name=f"ragged{tag}")
    # key column c of the tile is k0 + c: past the keys where c > Sk − k0 − 1
    last_col = b.arith.sub(bound, g.c1, name=f"last_col{tag}")
    s = masked_where(g, s, ragged, last_col, 0, f"_past{tag}")
    if config.causal:
        # query row r of the warpgroup's rows (row0 + r) sees key column c of the tile (k0 + c) iff
        # k0 + c <= row0 + r + Sk - Sq, i.e. c <= r + diag
        diag = b.arith.add(b.arith.sub(g.row0, k0, name=f"diag0{tag}"), g.diag_shift, name=f"diag{tag}")
        crossing = b.arith.cmp(diag, g.c_widest, pred="lt", name=f"crossing{tag}")
        s = masked_where(g, s, crossing, diag, 1, f"_above{tag}")
    return s


def masked_where(g, s, cond, limit, slope: int, tag: str):
    """``scf.if cond``: S with the values past ``col > limit + slope·row`` (tile coordinates of the warpgroup's (64,
    bn) S tile) set to −inf (``frag.mask_past``); S unchanged otherwise."""
    b = g.b
    tv, tile = score_layout(g.config)
    branch = b.scf.if_(cond, types=(s.type,), names=[f"s_masked{tag}"])
    with branch.then:
        ninf = b.const(float("-inf"), f32, name=f"s_ninf{tag}")
        b.scf.yield_(b.frag.mask_past(s, g.lt, limit, ninf, tv=tv, tile=tile, slope=slope, name=f"s_fill{tag}"))
    with branch.otherwise:
        b.scf.yield_(s)
    return branch.results[0]


def pipeline_iteration(g, kt, name: str):
    """The K/V pipelines' iteration of the warpgroup's KV tile ``kt``: ``kt``, or (persistent) ``g.kv_base + kt``,
    the counter running on across the CTA's work items (the producer's runs alike); ``pack_lone``: ``g.kv_base +
    g.kv_stride·kt`` (a packed item interleaves its streams' tiles)."""
    if g.kv_base is None:
        return kt
    if g.kv_stride is not None:
        kt = g.b.arith.mul(kt, g.kv_stride, name=f"{name}_strided")
    return g.b.arith.add(g.kv_base, kt, name=name)


def release_round(g, kt, tag: str, skip_own: bool) -> None:
    """``pack_lone``: the K and V stages of round ``kt`` of the item (iterations kv_item + streams·kt + v, v < streams)
    released by this warpgroup, each once it is full (``release_unseen``'s rule), but its own (v = ``kv_offset``)
    where ``skip_own``: it releases that one after its wgmmas read it. Every consumer warp must release every stage,
    and in a packed item each stage is read by one warpgroup only."""
    b = g.b
    start = b.arith.add(g.kv_item, b.arith.mul(g.streams, kt, name=f"round_offset{tag}"), name=f"round_it{tag}")
    for v in range(g.config.consumer_warpgroups):
        cv = b.const(v, i32, name=f"round_stream{v}{tag}")
        cond = b.arith.cmp(cv, g.streams, pred="lt", name=f"round_has{v}{tag}")
        if skip_own:
            cond = b.arith.and_(cond, b.arith.cmp(cv, g.kv_offset, pred="ne", name=f"round_other{v}{tag}"),
                                name=f"round_release{v}{tag}")
        with b.scf.if_(cond).then:
            it = b.arith.add(start, cv, name=f"round_it{v}{tag}")
            b.pipeline.release(g.pk, b.pipeline.wait(g.pk, it, name=f"rks{v}{tag}"))
            b.pipeline.release(g.pv, b.pipeline.wait(g.pv, it, name=f"rvs{v}{tag}"))
            b.scf.yield_()


def release_others(g, kt, tag: str = "") -> None:
    """``pack_lone``, after the warpgroup's own round ``kt``: in a packed item, the other streams' stages of the round
    (``release_round``); nothing otherwise."""
    if not g.config.pack_lone:
        return
    with g.b.scf.if_(g.packed).then:
        release_round(g, kt, f"_own{tag}", skip_own=True)
        g.b.scf.yield_()


def issue_scores(g, kt, tag: str = ""):
    """Wait for KV tile ``kt``'s K stage and queue S = Q·Kᵀ (from zero) as one wgmma group, fenced in its own
    statement (``{fence = true}``: after the pipeline wait, nothing comes between the fence and the wgmma); → (S in
    flight, the stage)."""
    b = g.b
    ks = b.pipeline.wait(g.pk, pipeline_iteration(g, kt, f"k_it{tag}"), name=f"cks{tag}")
    k_view = operand_view(b, b.smem.slice(g.sk_ring, ks, name=f"k_stage{tag}"), (0, 1), f"k_nk{tag}", g.lead)
    s = b.wgmma.mma(g.q_rows, k_view, g.zero_s, fence=True, name=f"s_issued{tag}")
    b.wgmma.commit()
    return s, ks


def block_names(base: str, count: int, tag: str = "") -> list:
    """The value names of O's ``count`` column blocks: ``base{tag}`` for one, ``base_{j}{tag}`` for several."""
    return [f"{base}{tag}"] if count == 1 else [f"{base}_{j}{tag}" for j in range(count)]


def issue_pv(g, p16, o_blocks, kt, tag: str = ""):
    """Wait for KV tile ``kt``'s V stage and queue O += P·V (RS: P in registers, ``p16``; ``p_in_smem``: SS, P the
    warpgroup's staged tile ``g.p_rows`` and ``p16`` None; V seen (D, rows) MN-major; one wgmma per column block of O)
    as one wgmma group, each wgmma fenced in its own statement as in ``issue_scores``; → (O's blocks in flight, the
    stage)."""
    b, config = g.b, g.config
    vs = b.pipeline.wait(g.pv, pipeline_iteration(g, kt, f"v_it{tag}"), name=f"cvs{tag}")
    v_view = operand_view(b, b.smem.slice(g.sv_ring, vs, name=f"v_stage{tag}"), (1, 0), f"v_nk{tag}", g.lead)
    count = len(o_blocks)
    issued = []
    for j, (o, name) in enumerate(zip(o_blocks, block_names("o_issued", count, tag))):
        view = v_view if count == 1 else b.smem.tile(v_view, b.const(j, i32, name=f"pv_block{j}{tag}"), mode=0,
                                                     size=config.o_block, name=f"v_nk{j}{tag}")
        if config.p_in_smem:
            issued.append(b.wgmma.mma(g.p_rows, view, o, fence=True, name=name))
        else:
            issued.append(b.wgmma.mma_rs(p16, view, o, fence=True, name=name))
    b.wgmma.commit()
    return issued, vs


def wait_blocks(g, o_blocks, base: str, tag: str = "") -> list:
    """``wgmma.wait {pending = 0}`` passing O's blocks through (named ``base``…)."""
    done = g.b.wgmma.wait(*o_blocks, pending=0, name=block_names(base, len(o_blocks), tag))
    return list(done) if isinstance(done, tuple) else [done]


def stage_p(g, p16) -> None:
    """``p_in_smem``: P's 16-bit fragment stored by stmatrix into the warpgroup's (64, bn) tile of P (K-major SW128:
    the SS wgmma's A operand), made visible to the async proxy (``fence.proxy_async``) and to the whole warpgroup
    (its own named barrier) before a wgmma reads it. The caller has waited for every wgmma reading the previous P."""
    b, config = g.b, g.config
    b.smem.stmatrix(g.p_rows, g.lt, p16, tv=accumulator_tv(config.bn), num=4, trans=False)
    b.fence.proxy_async()
    warpgroup_barrier(g)


def softmax_step(g, s, m, l, kt, tag: str = ""):
    """The online softmax of KV tile ``kt``'s scores S (completed) under the running (m, l): masks, m' = max(m,
    rowmax S), P = exp2(S·c − m'·c), α = exp2(m·c − m'·c), l' = l·α + rowsum P. → (P in 16 bits: the RS A fragment,
    m', l', α, the warp's rescale condition: None, or with ``rescale_threshold`` τ the i1 of ``lazy_max``)."""
    b, config = g.b, g.config
    tv, tile = score_layout(config)
    s = mask_scores(g, s, b.arith.mul(kt, g.c_bn, name=f"ck0{tag}"), tag)
    row_max = b.frag.reduce(s, g.lt, tv=tv, tile=tile, mode=1, kind="max", type=s.type, name=f"row_max{tag}")
    if config.rescale_threshold:
        m_new, alpha, grows = lazy_max(g, m, row_max, tag)
    else:
        m_new, grows = b.frag.max(m, row_max, name=f"m_new{tag}"), None
        alpha = None
    neg_mc = b.frag.mul(m_new, g.neg_scale_log2, name=f"neg_mc{tag}")
    # ftz: one MUFU.EX2 per value (a P or α below 2^-126 is 0 to the bf16/f16 P and the f32 sums alike); the
    # exp2_poly share on the FP32 pipe instead, so the MUFU is not the D = 64 kernel's bound
    poly = {"poly": TupleAttr(config.exp2_poly)} if config.exp2_poly[0] else {}
    p = b.frag.exp2(b.frag.fma(s, g.scale_log2, neg_mc, name=f"p_log2{tag}"), ftz=True, name=f"p{tag}", **poly)
    if alpha is None:
        alpha = b.frag.exp2(b.frag.fma(m, g.scale_log2, neg_mc, name=f"alpha_log2{tag}"), ftz=True,
                            name=f"alpha{tag}")
    row_sum = b.frag.reduce(p, g.lt, tv=tv, tile=tile, mode=1, kind="add", type=s.type, name=f"row_sum{tag}")
    l_new = b.frag.fma(l, alpha, row_sum, name=f"l_new{tag}")
    p16 = b.frag.cast(p, type=frag(config.dtype, config.bn // 2), name=f"p16{tag}")
    return p16, m_new, l_new, alpha, grows


def lazy_max(g, m, row_max, tag: str = ""):
    """FlashAttention-4's conditional rescaling (``rescale_threshold`` τ): the running max m moves only in the warps
    where some row's max exceeds it by more than τ in exp2's units ((rowmax − m)·c > τ, voted over the warp so the
    branch is the warp's); elsewhere m stays, α = 1 and O is not rescaled (``rescale``). P = exp2(S·c − m·c) is
    then at most 2^τ, well inside the 16-bit P and the f32 sums; O and l stay consistent with the m they were taken
    under, so O/l and the lse (from that m) are unchanged. → (m', α, the warp's i1 condition)."""
    b = g.b
    rise = b.frag.fma(row_max, g.scale_log2, b.frag.mul(m, g.neg_scale_log2, name=f"neg_mc_old{tag}"),
                      name=f"rise{tag}")
    grows = b.frag.cmp(rise, g.rescale_threshold, pred="gt", name=f"grows{tag}")
    # a thread's values cover two rows: values 0 and 2 (a value's row depends only on its index mod 4)
    own = b.arith.or_(b.frag.extract(grows, index=0, name=f"grows_row0{tag}"),
                      b.frag.extract(grows, index=2, name=f"grows_row1{tag}"), name=f"grows_own{tag}")
    warp_grows = b.gpu.vote_any(own, name=f"warp_grows{tag}")
    branch = b.scf.if_(warp_grows, types=(m.type, m.type), names=[f"m_new{tag}", f"alpha{tag}"])
    with branch.then:
        m_up = b.frag.max(m, row_max, name=f"m_up{tag}")
        neg_up = b.frag.mul(m_up, g.neg_scale_log2, name=f"neg_mc_up{tag}")
        b.scf.yield_(m_up, b.frag.exp2(b.frag.fma(m, g.scale_log2, neg_up, name=f"alpha_log2{tag}"), ftz=True,
                                       name=f"alpha_up{tag}"))
    with branch.otherwise:
        b.scf.yield_(m, g.one_s)
    m_new, alpha = branch.results
    return m_new, alpha, warp_grows


def rescale(g, o_blocks, alpha, grows=None, tag: str = ""):
    """O·α per column block: a block's o_block/2 values take the first o_block/2 of α's (the same rows). ``grows``
    (``lazy_max``'s warp condition): only in the warps where it holds (α = 1 elsewhere)."""
    b, config = g.b, g.config
    ob = config.o_block
    names = block_names("o_scaled", len(o_blocks), tag)

    def scaled():
        alpha_o = alpha if ob == config.bn else b.frag.slice(alpha, offset=0, type=frag("f32", ob // 2),
                                                             name=f"alpha_o{tag}")
        return [b.frag.mul(o, alpha_o, name=f"{name}_mul" if grows is not None else name)
                for o, name in zip(o_blocks, names)]
    if grows is None:
        return scaled()
    branch = b.scf.if_(grows, types=[o.type for o in o_blocks], names=names)
    with branch.then:
        b.scf.yield_(*scaled())
    with branch.otherwise:
        b.scf.yield_(*o_blocks)
    return list(branch.results)


def consume(g):
    """The consumer warpgroup's KV loop over tiles 0 … n_end-1; → (O's column blocks, m, l) after the last tile (O's
    wgmmas completed)."""
    wait_q(g, g.c0)
    setup(g)
    return mainloop(g)


def wait_q(g, parity) -> None:
    """Wait until Q's tile of the item has landed (the phase of parity ``parity`` of Q's barrier)."""
    g.b.mbarrier.wait(g.qbar, g.c0, parity)


def setup(g) -> None:
    """The consumer's values shared by its work items: its rows of Q's (and P's) tile, the folded scale, the masks'
    constants, the zero S and the initial O, m and l (``g.o0``, ``g.m0``, ``g.l0``)."""
    b, kb, config = g.b, g.kb, g.config
    bn = config.bn
    s_t, o_t = frag("f32", bn // 2), frag("f32", config.o_block // 2)
    if config.q_tiles == 1:   # else per item: Q's tile alternates between two buffers
        query_rows(g)
    if config.p_in_smem:
        g.p_rows = b.smem.tile(g.sp_tile, g.cw, mode=0, size=CONSUMER_ROWS, name="p_rows")
    fzero = b.const(0.0, f32, name="fzero")
    g.scale_log2 = b.arith.mul(kb["scale"], b.const(math.log2(math.e), f32, name="log2e"), name="scale_log2")
    g.neg_scale_log2 = b.arith.sub(fzero, g.scale_log2, name="neg_scale_log2")
    if config.causal:
        g.c_widest = b.const(bn - 1, i32, name="widest")
    g.zero_s = b.frag.splat(fzero, type=s_t, name="zero_s")
    g.o0 = b.frag.splat(fzero, type=o_t, name="o0")
    g.m0 = b.frag.splat(b.const(M_INIT, f32, name="m_init"), type=s_t, name="m0")
    g.l0 = b.frag.splat(fzero, type=s_t, name="l0")
    if config.rescale_threshold:
        g.rescale_threshold = b.const(float(config.rescale_threshold), f32, name="rescale_threshold")
        g.one_s = b.frag.splat(b.const(1.0, f32, name="fone"), type=s_t, name="one_s")


def query_rows(g) -> None:
    """``g.q_rows``: the warpgroup's 64 rows of Q's tile ``g.sq_tile``, the A operand of S = Q·Kᵀ."""
    b = g.b
    g.q_rows = b.smem.tile(operand_view(b, g.sq_tile, (0, 1), "q_mk", g.lead), g.cw, mode=0, size=CONSUMER_ROWS,
                           name="q_rows")


def mainloop(g):
    """The KV loop of the item (``g.n_end`` tiles: the warpgroup computes its ``own_tiles`` ``g.n_own`` and passes
    the rest by ``idle_sections``) from ``g.o0``, ``g.m0``, ``g.l0``; → (O's column blocks, m, l), O's wgmmas
    completed. ``g.q_done`` (persistent) is built where every S = Q·Kᵀ of the item has completed."""
    b, config = g.b, g.config
    count = config.head_dim // config.o_block
    o0, m0, l0 = g.o0, g.m0, g.l0
    g.n_own = own_tiles(g)
    if config.overlap:
        return consume_overlapped(g, [o0] * count, m0, l0)
    with b.scf.for_(g.c0, g.n_own, g.c1, *([o0] * count), m0, l0,
                    args=["ct"] + block_names("o", count) + ["m", "l"],
                    names=block_names("o_end", count) + ["m_end", "l_end"]) as loop:
        ct, *o, m, l = loop
        s_issued, ks = issue_scores(g, ct)
        s = b.wgmma.wait(s_issued, pending=0, name="s")
        b.pipeline.release(g.pk, ks)
        p16, m_new, l_new, alpha, grows = softmax_step(g, s, m, l, ct)
        o_scaled = rescale(g, o, alpha, grows)
        if config.p_in_smem:
            stage_p(g, p16)
        o_issued, vs = issue_pv(g, p16, o_scaled, ct)
        o_new = wait_blocks(g, o_issued, "o_new")
        b.pipeline.release(g.pv, vs)
        release_others(g, ct)
        b.scf.yield_(*o_new, m_new, l_new)
    if g.q_done is not None:
        g.q_done()
    idle_sections(g)
    *o_end, m_end, l_end = loop.results
    return o_end, m_end, l_end


def own_tiles(g):
    """The KV tiles the warpgroup's own 64 rows see (``skip_unseen``; else the CTA's ``g.n_end``): none where its
    first row ``row0`` lies past Sq (``align_bottom``: past the item's ``row_limit``); causal, those up to the tile holding its last row's last visible key column
    min(row0 + 64, Sq) − 1 + Sk − Sq (``kv_tiles``' bound for the warpgroup's rows instead of the CTA's), at most
    n_end. E.g. Sq = Sk = 1024, bm = 192, bn = 128: the last query tile's warpgroups 1 and 2 (rows 1024 … 1151) see
    none of its 8 tiles; causal, warpgroup 0 of query tile 1 (rows 192 … 255) sees 2 of the CTA's 3."""
    b, config = g.b, g.config
    if not config.skip_unseen:
        return g.n_end
    has_rows = b.arith.cmp(g.row0, g.row_limit if config.align_bottom else g.sq, pred="lt", name="wg_has_rows")
    tiles = g.n_end
    if config.causal:
        rows_end = b.arith.min(b.arith.add(g.row0, b.const(CONSUMER_ROWS, i32, name="wg_rows"), name="wg_end0"),
                               g.sq, name="wg_end")
        visible = b.arith.max(b.arith.add(rows_end, g.diag_shift, name="wg_visible0"), g.c0, name="wg_visible")
        tiles = b.arith.min(tiles, b.arith.cdiv(visible, g.c_bn, name="wg_causal_tiles"), name="wg_seen_tiles")
    return b.arith.select(has_rows, tiles, g.c0, name="own_tiles")


def release_unseen(g, kt, tag: str) -> None:
    """KV tile ``kt``'s K and V stages released by a warpgroup that does not compute it, each once it is full (a
    release before the stage's load could count toward the stage's previous phase); ``pack_lone``: every stream's
    (``release_round``)."""
    b = g.b
    if g.config.pack_lone:
        release_round(g, kt, f"_idle{tag}", skip_own=False)
        return
    b.pipeline.release(g.pk, b.pipeline.wait(g.pk, pipeline_iteration(g, kt, f"k_it_idle{tag}"), name=f"iks{tag}"))
    b.pipeline.release(g.pv, b.pipeline.wait(g.pv, pipeline_iteration(g, kt, f"v_it_idle{tag}"), name=f"ivs{tag}"))


def idle_sections(g) -> None:
    """What a warpgroup does for the item's KV tiles own_tiles … n_end − 1 it does not compute (``skip_unseen``):
    releases each tile's K and V stages (``release_unseen``) and, under the ping-pong, runs the sections the ring
    expects of it without queuing a wgmma — every warpgroup runs n_end + 1 sections per item (``pingpong_turn``):
    one taking tile 0's S if it saw no tile at all, then one per unseen tile, the last of them the item's last
    section (``pass_last``). Nothing is built without ``skip_unseen``."""
    b, config = g.b, g.config
    if not config.skip_unseen:
        return
    pingpong = config.pingpong

    def section(final=False):
        if pingpong:
            pingpong_turn(g, "take")
            pingpong_turn(g, "pass_last" if final and not config.continuous_turns else "pass")

    with b.scf.if_(b.arith.cmp(g.n_own, g.n_end, pred="lt", name="unseen_tiles")).then:
        if pingpong:
            with b.scf.if_(b.arith.cmp(g.n_own, g.c0, pred="eq", name="saw_none")).then:
                section()   # the section of tile 0's S = Q·Kᵀ
                b.scf.yield_()
        last = b.arith.sub(g.n_end, g.c1, name="last_unseen")
        with b.scf.for_(g.n_own, last, g.c1, args=("unseen",)) as (kt,):
            section()
            release_unseen(g, kt, "")
            b.scf.yield_()
        section(final=True)
        release_unseen(g, last, "_last")
        b.scf.yield_()


def consume_overlapped(g, o0: list, m0, l0):
    """The intra-warpgroup overlap (FA3's Algorithm 2): tile 0's softmax first; then per tile j ≥ 1 S_j = Q·K_jᵀ and
    O += P_{j-1}·V_{j-1} are queued back to back, the wait for S_j leaves the P·V group in flight (``pending = 1``),
    the softmax of S_j runs while the tensor cores work on P_{j-1}·V_{j-1}, and only then is O waited for and
    rescaled by α_j; the last P·V after the loop (over the warpgroup's ``g.n_own`` tiles; ``idle_sections`` for the
    rest). P_{j-1} is carried in 16 bits. Tile 0 and the last P·V are in branches on ``n_own > 0`` (causal
    warpgroups, and those past Sq, may see no tile), each branch waiting for its own wgmmas: no accumulator
    in flight crosses a branch or the loop's back edge. ``p_in_smem``: P_j is staged in the warpgroup's P tile once
    O += P_{j-1}·V_{j-1} (which reads the tile) is waited for, and nothing is carried in registers."""
    b, config = g.b, g.config
    carry_p = not config.p_in_smem
    p_t = frag(config.dtype, config.bn // 2)
    # the ring restarts at each item that has sections (else it started before the first item): with skip_unseen
    # before the first section, which may be one of unseen tiles; else in the branch of tile 0's section
    restart = config.pingpong and not config.continuous_turns
    if restart and config.skip_unseen:
        with b.scf.if_(b.arith.cmp(g.n_end, g.c0, pred="gt", name="any_section")).then:
            pingpong_turn(g, "start")
            b.scf.yield_()
    any_tile = b.arith.cmp(g.n_own, g.c0, pred="gt", name="any_tile")
    first = b.scf.if_(any_tile, types=((p_t,) if carry_p else ()) + (m0.type, l0.type),
                      names=(["p_tile0"] if carry_p else []) + ["m_tile0", "l_tile0"])
    with first.then:
        if restart and not config.skip_unseen:
            pingpong_turn(g, "start")
        if config.pingpong:
            pingpong_turn(g, "take")
        s_issued, ks = issue_scores(g, g.c0, "_first")
        if config.pingpong:
            pingpong_turn(g, "pass")
        s = b.wgmma.wait(s_issued, pending=0, name="s_first")
        b.pipeline.release(g.pk, ks)
        p16, m1, l1, _alpha, _grows = softmax_step(g, s, m0, l0, g.c0, "_first")
        release_others(g, g.c0, "_first")
        if carry_p:
            b.scf.yield_(p16, m1, l1)
        else:
            stage_p(g, p16)
            b.scf.yield_(m1, l1)
    with first.otherwise:
        if carry_p:
            b.scf.yield_(b.frag.cast(g.zero_s, type=p_t, name="p_none"), m0, l0)
        else:
            b.scf.yield_(m0, l0)
    count = len(o0)
    p_args, p_names = (["p_prev"], ["p_last"]) if carry_p else ([], [])
    with b.scf.for_(g.c1, g.n_own, g.c1, *o0, *first.results, args=["ct"] + block_names("o", count) + p_args +
                    ["m", "l"], names=block_names("o_loop", count) + p_names + ["m_end", "l_end"]) as loop:
        ct, *o, m, l = loop
        p_prev = o.pop() if carry_p else None
        if config.pingpong:
            pingpong_turn(g, "take")
        s_issued, ks = issue_scores(g, ct)
        prev = b.arith.sub(ct, g.c1, name="prev_tile")
        o_issued, vs_prev = issue_pv(g, p_prev, o, prev)
        if config.pingpong:
            pingpong_turn(g, "pass")
        s = b.wgmma.wait(s_issued, pending=1, name="s")   # S_j done, O += P_{j-1}·V_{j-1} still in flight
        b.pipeline.release(g.pk, ks)
        p16, m_new, l_new, alpha, grows = softmax_step(g, s, m, l, ct)
        o_done = wait_blocks(g, o_issued, "o_done")
        b.pipeline.release(g.pv, vs_prev)
        o_next = rescale(g, o_done, alpha, grows)
        release_others(g, ct)
        if carry_p:
            b.scf.yield_(*o_next, p16, m_new, l_new)
        else:
            stage_p(g, p16)
            b.scf.yield_(*o_next, m_new, l_new)
    if g.q_done is not None:
        g.q_done()   # S_{n_end-1} completed in the loop (or tile 0's branch): Q is read no more
    *o_loop, m_end, l_end = loop.results
    p_last = o_loop.pop() if carry_p else None
    last = b.scf.if_(any_tile, types=[x.type for x in o0], names=block_names("o_end", count))
    with last.then:
        if config.pingpong:
            pingpong_turn(g, "take")
        last_tile = b.arith.sub(g.n_own, g.c1, name="last_tile")
        o_issued, vs = issue_pv(g, p_last, o_loop, last_tile, "_last")
        if config.pingpong:
            # continuous turns: the last warpgroup hands on to warpgroup 0's next item too; sections of unseen
            # tiles after this one: to warpgroup 0's next section of the item
            if config.continuous_turns:
                pingpong_turn(g, "pass")
            else:
                pingpong_turn(g, "pass_last", more=b.arith.cmp(g.n_own, g.n_end, pred="lt", name="more_sections")
                              if config.skip_unseen else None)
        o_last = wait_blocks(g, o_issued, "o_last")
        b.pipeline.release(g.pv, vs)
        b.scf.yield_(*o_last)
    with last.otherwise:
        b.scf.yield_(*o_loop)
    idle_sections(g)
    return list(last.results), m_end, l_end


def turn_barrier(v: int) -> int:
    """The named barrier that opens consumer warpgroup v's next wgmma section: v + 1 (0 is the CTA barrier)."""
    return v + 1


def pingpong_turn(g, point: str, more=None):
    """FA3's inter-warpgroup ping-pong, round-robin over the w consumer warpgroups: their wgmma sections (S_0; then per
    tile S_j queued with P_{j-1}·V_{j-1}; then the last P·V) strictly take turns, warpgroup 0 first, then 1, …, w−1,
    0, …, so that one's softmax runs while the others' GEMMs occupy the tensor cores. Warpgroup v waits for its turn
    on barrier ``turn_barrier(v)`` (``barrier.named``, 256 threads: its own 128 and the previous warpgroup's 128
    arrivals) and, its section queued, hands the turn to warpgroup v + 1 (mod w) with a non-blocking
    ``barrier.arrive`` on that one's barrier, so it never waits for another to reach a point — only for the previous
    one's section to be queued. ``point``: "start" (the last warpgroup's first arrival on warpgroup 0's barrier:
    warpgroup 0 goes first), "take" (before a section), "pass" (after it, every warpgroup), "pass_last" (after an
    item's last section: every warpgroup but the last; with ``more``, an i1, the last warpgroup too where ``more``
    holds: its section was not the item's last), "drain" (warpgroup 0 takes the last warpgroup's final hand-over).

    Invariants. Every consumer warpgroup of a work item runs the same sections: n_end + 1 of them, or none when
    n_end = 0 (n_end, the item's KV tiles, depends only on the CTA's query tile — its first row and bm, not the
    warpgroup's 64 rows — and the sequences, so every warpgroup computes the same value; a warpgroup that computes
    fewer tiles, ``skip_unseen``, runs the rest of its sections without wgmmas: ``idle_sections``). Hence the k-th
    section of every warpgroup belongs to the same item and the ring's k-th round is wg 0, 1, …, w−1's k-th sections.
    Barrier v ≥ 1 completes one generation per round (wg v's take, wg v−1's pass). Warpgroup 0's barrier completes a
    generation per wait of warpgroup 0 only if the last warpgroup arrives there exactly as often ("start" and its
    passes):

    - per item (default): "start" before the item's first section (in a branch on n_end > 0, or without
      ``skip_unseen`` in that section's branch) and "pass_last" after its last section: per item n_end + 1 takes of
      warpgroup 0 against 1 + n_end arrivals; an item of no sections runs neither.
    - ``continuous_turns`` (persistent): "start" once before the CTA's first item, "pass" after every section (the
      last warpgroup's hand-over after item i's last section opens warpgroup 0's item i+1), and "drain" once after
      the CTA's last item: over the CTA's N sections, 1 + N arrivals against N + 1 waits, whatever items had no
      sections (a final item of n_end = 0 leaves the hand-over of the last item that had sections to the drain;
      N = 0 pairs "start" with "drain"). So no arrival is left without its waiter when the CTA exits.

    In both, a warpgroup cannot arrive twice on a barrier before its waiter took the first arrival: its next section
    waits for the whole ring, the waiter's section included (the drain takes the generation after warpgroup 0's last
    take, which the last warpgroup's final pass — after its own last take — cannot precede)."""
    b = g.b
    count = g.config.consumer_warpgroups

    def turn(v):
        if point in ("take", "drain"):
            b.barrier.named(id=turn_barrier(v), threads=256)
        elif point == "pass_last" and v == count - 1:
            # ``more``: the warpgroup's item has sections after this one (``idle_sections``): a plain pass
            with b.scf.if_(more).then:
                b.barrier.arrive(id=turn_barrier(0), threads=256)
                b.scf.yield_()
        elif point in ("pass", "pass_last") or v == count - 1:
            b.barrier.arrive(id=turn_barrier((v + 1) % count), threads=256)

    upto = {"pass_last": count if more is not None else count - 1, "drain": 1}.get(point, count)
    by_warpgroup(g, turn, upto=upto)
