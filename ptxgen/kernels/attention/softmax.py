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
and value (``accumulator_tv(N)`` = ``rs_a_tv(T, 64, N)``, tests/ptxgen/test_attention_layouts.py), so the
conversion moves no data. O's D/2 values are a prefix of S's N/2 value order (D ≤ N): a value's row depends only on
its index mod 4, so O takes the statistics as ``frag.slice``s.
"""
from __future__ import annotations

import math

from layoutc.hopper import accumulator_tv

from ptxgen.ir.builder import f32, frag, i32

from .config import CONSUMER_ROWS
from .layouts import operand_view

M_INIT = -2.0 ** 100    # the running max before any score: finite, far below any score
NO_DIAGONAL = 1 << 30   # a diag no column − row difference of a tile exceeds (non-causal)


def score_layout(config):
    """(the TV layout of a consumer's S = (64, bn) accumulator, the tile shape)."""
    return accumulator_tv(config.bn), (CONSUMER_ROWS, config.bn)


def mask_scores(g, s, k0, s_t):
    """S with the key columns past Sk and (causal) the query-key pairs above the diagonal set to −inf — only on the
    tiles that hold any (``scf.if``): the ragged last tile and, causal, the tiles crossing the diagonal."""
    b, kb, config = g.b, g.kb, g.config
    tv, tile = score_layout(config)
    bound = b.arith.sub(kb["sk"], k0, name="col_bound")
    ragged = b.arith.cmp(bound, g.c_bn, pred="lt", name="ragged")
    if config.causal:
        # query row r of the warpgroup's rows (row0 + r) sees key column c of the tile (k0 + c) iff
        # k0 + c <= row0 + r + Sk - Sq, i.e. c - r <= diag
        diag = b.arith.add(b.arith.sub(g.row0, k0, name="diag0"), g.diag_shift, name="diag")
        crossing = b.arith.cmp(diag, b.const(config.bn - 1, i32, name="widest"), pred="lt", name="crossing")
        need = b.arith.or_(ragged, crossing, name="need_mask")
    else:
        diag, need = b.const(NO_DIAGONAL, i32, name="no_diag"), ragged
    branch = b.scf.if_(need, types=(s_t,), names=["s_masked"])
    with branch.then:
        b.scf.yield_(b.mask.fill(s, g.lt, diag, bound, tv=tv, tile=tile, value=float("-inf"), name="s_fill"))
    with branch.otherwise:
        b.scf.yield_(s)
    return branch.results[0]


def consume(g):
    """The consumer warpgroup's KV loop over tiles 0 … n_end-1; → (O, m, l) after the last tile (O's wgmmas
    completed)."""
    b, kb, config = g.b, g.kb, g.config
    bn, d = config.bn, config.head_dim
    s_t, o_t, p_t = frag("f32", bn // 2), frag("f32", d // 2), frag(config.dtype, bn // 2)
    tv, tile = score_layout(config)
    b.mbarrier.wait(g.qbar, g.c0, g.c0)
    q_rows = b.smem.tile(operand_view(b, g.sq_tile, (2, 3), "q_mk"), g.cw, mode=0, size=CONSUMER_ROWS,
                         name="q_rows")
    fzero = b.const(0.0, f32, name="fzero")
    g.scale_log2 = c = b.arith.mul(kb["scale"], b.const(math.log2(math.e), f32, name="log2e"), name="scale_log2")
    neg_c = b.arith.sub(fzero, c, name="neg_scale_log2")
    zero_s = b.frag.splat(fzero, type=s_t, name="zero_s")
    o0 = b.frag.splat(fzero, type=o_t, name="o0")
    m0 = b.frag.splat(b.const(M_INIT, f32, name="m_init"), type=s_t, name="m0")
    l0 = b.frag.splat(fzero, type=s_t, name="l0")
    with b.scf.for_(g.c0, g.n_end, g.c1, o0, m0, l0, args=("ct", "o", "m", "l"),
                    names=["o_end", "m_end", "l_end"]) as loop:
        ct, o, m, l = loop
        k0 = b.arith.mul(ct, g.c_bn, name="ck0")
        ks = b.pipeline.wait(g.pk, ct, name="cks")
        k_view = operand_view(b, b.smem.slice(g.sk_ring, ks, name="k_stage"), (2, 3), "k_nk")
        b.wgmma.fence()
        s = b.wgmma.mma(q_rows, k_view, zero_s, name="s_issued")
        b.wgmma.commit()
        s = b.wgmma.wait(s, pending=0, name="s")
        b.pipeline.release(g.pk, ks)
        s = mask_scores(g, s, k0, s_t)

        row_max = b.frag.reduce(s, g.lt, tv=tv, tile=tile, mode=1, kind="max", type=s_t, name="row_max")
        m_new = b.frag.max(m, row_max, name="m_new")
        neg_mc = b.frag.mul(m_new, neg_c, name="neg_mc")
        p = b.frag.exp2(b.frag.fma(s, c, neg_mc, name="p_log2"), name="p")
        alpha = b.frag.exp2(b.frag.fma(m, c, neg_mc, name="alpha_log2"), name="alpha")
        row_sum = b.frag.reduce(p, g.lt, tv=tv, tile=tile, mode=1, kind="add", type=s_t, name="row_sum")
        l_new = b.frag.fma(l, alpha, row_sum, name="l_new")
        alpha_o = alpha if d == bn else b.frag.slice(alpha, offset=0, type=o_t, name="alpha_o")
        o_scaled = b.frag.mul(o, alpha_o, name="o_scaled")
        p16 = b.frag.cast(p, type=p_t, name="p16")

        vs = b.pipeline.wait(g.pv, ct, name="cvs")
        v_view = operand_view(b, b.smem.slice(g.sv_ring, vs, name="v_stage"), (3, 2), "v_nk")
        b.wgmma.fence()
        o_issued = b.wgmma.mma_rs(p16, v_view, o_scaled, name="o_issued")
        b.wgmma.commit()
        o_new = b.wgmma.wait(o_issued, pending=0, name="o_new")
        b.pipeline.release(g.pv, vs)
        b.scf.yield_(o_new, m_new, l_new)
    return tuple(loop.results)
