"""Which work items a persistent attention CTA computes (``AttentionConfig.persistent``): the grid of
min(work items, ``%ctas``) CTAs and each CTA's walk over the work items (batch, head, query tile).

Work item t (0 ≤ t < tiles_m · heads · batches) is query tile t mod tiles_m of head (t / tiles_m) mod heads of batch
t / (tiles_m · heads): a head's query tiles are neighbours, so the CTAs running together read the same K and V
(L2). Causal items take their query tiles longest first (tile tiles_m − 1 − t mod tiles_m), as the non-persistent
grid does. The items are dealt in rounds of G = gridDim.x in serpentine order: in round r CTA c takes item r·G + c
(r even) or r·G + G − 1 − c (r odd), so that a CTA given a long causal tile in one round gets a short one in the
next (a plain stride r·G + c would give CTA c the same few tile lengths in every round when G and tiles_m share
factors: 1.3-1.7× the average load on the longest CTA at S = 1k against 1.03×).
"""
from __future__ import annotations

from ptxgen.ir.builder import cdiv, hmin, i32, mul


def grid(config) -> tuple:
    """The persistent launch grid: ``(min(tiles_m · %heads · %batches, %ctas), 1, 1)``, tiles_m = ⌈%sq / bm⌉
    (varlen: ⌈%max_sq / bm⌉). ``grid(AttentionConfig(persistent=True))`` = (min(cdiv(%sq, 128) * %heads *
    %batches, %ctas), 1, 1)."""
    rows = "max_sq" if config.varlen else "sq"
    return hmin(mul(mul(cdiv(rows, config.bm), "heads"), "batches"), "ctas"), 1, 1


def rounds(g) -> None:
    """The CTA's share of the work items, built before the roles split: ``g.rounds`` (the rounds in which it has an
    item: every full round, and the last, partial one if its serpentine position there holds an item), ``g.first``
    (c), ``g.step`` (G), ``g.mirror`` (G − 1 − c), ``g.tiles_m``, ``g.c_bm``, ``g.c2``. With 10 items on G = 4
    CTAs: rounds 0 and 1 full, round 2 holds items 8, 9 at positions 0, 1: CTAs 0 and 1 have 3 rounds, 2 and 3 two."""
    b, kb, config = g.b, g.kb, g.config
    c0, c1 = g.c0, g.c1
    g.first = b.gpu.block_id(dim="x", name="first")
    g.step = b.gpu.grid_dim(dim="x", name="step")
    g.c_bm = b.const(config.bm, i32, name="bm")
    g.c2 = b.const(2, i32, name="two")
    g.tiles_m = b.arith.cdiv(kb["max_sq" if config.varlen else "sq"], g.c_bm, name="tiles_m")
    items = b.arith.mul(b.arith.mul(g.tiles_m, kb["heads"], name="head_items"), kb["batches"], name="items")
    full = b.arith.div(items, g.step, name="full_rounds")
    rest = b.arith.rem(items, g.step, name="last_round_items")
    g.mirror = b.arith.sub(b.arith.sub(g.step, c1, name="last_cta"), g.first, name="mirror")
    full_odd = b.arith.cmp(b.arith.rem(full, g.c2, name="full_parity"), c0, pred="ne", name="last_round_odd")
    position = b.arith.select(full_odd, g.mirror, g.first, name="last_position")
    in_last = b.arith.cmp(position, rest, pred="lt", name="in_last_round")
    g.rounds = b.arith.add(full, b.arith.select(in_last, c1, c0, name="last_round"), name="rounds")
    if config.causal:
        g.last_m_tile = b.arith.sub(g.tiles_m, c1, name="last_m_tile")


def work_item(g, r, tag: str) -> None:
    """The work item of round ``r``: sets ``g.m_tile``, ``g.head``, ``g.batch`` (values named ``…{tag}``: each role
    computes its own). Post: over the CTAs and their rounds, every item exactly once."""
    b, kb, config = g.b, g.kb, g.config
    odd = b.arith.cmp(b.arith.rem(r, g.c2, name=f"round_parity{tag}"), g.c0, pred="ne", name=f"round_odd{tag}")
    position = b.arith.select(odd, g.mirror, g.first, name=f"position{tag}")
    t = b.arith.add(b.arith.mul(r, g.step, name=f"round_start{tag}"), position, name=f"item{tag}")
    m_index = b.arith.rem(t, g.tiles_m, name=f"m_index{tag}")
    head_batch = b.arith.div(t, g.tiles_m, name=f"head_batch{tag}")
    g.head = b.arith.rem(head_batch, kb["heads"], name=f"head{tag}")
    g.batch = b.arith.div(head_batch, kb["heads"], name=f"batch{tag}")
    # causal: the longest query tiles (the most KV tiles under the diagonal) first
    g.m_tile = b.arith.sub(g.last_m_tile, m_index, name=f"m_tile{tag}") if config.causal else m_index
