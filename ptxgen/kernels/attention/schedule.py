"""Which work items a persistent attention CTA computes (``AttentionConfig.persistent``): the grid of
min(work items, ``%ctas``) CTAs and each CTA's walk over the work items (batch, head, query tile).

Work item t (0 ≤ t < tiles_m · heads · batches) is query tile t mod tiles_m of head (t / tiles_m) mod heads of batch
t / (tiles_m · heads): a head's query tiles are neighbours, so the CTAs running together read the same K and V
(L2). Causal items take their query tiles longest first (tile tiles_m − 1 − t mod tiles_m), as the non-persistent
grid does. The items are dealt in rounds of G = gridDim.x in serpentine order: in round r CTA c takes item r·G + c
(r even) or r·G + G − 1 − c (r odd), so that a CTA given a long causal tile in one round gets a short one in the
next (a plain stride r·G + c would give CTA c the same few tile lengths in every round when G and tiles_m share
factors: 1.3-1.7× the average load on the longest CTA at S = 1k against 1.03×).

``pack_lone`` numbers the items otherwise (``packed_items``, ``packed_item``): groups of w (batch, head) pairs, each
group's full query tiles and then one item of its pairs' lone last tiles; the grid stays the unpacked count's bound.

``item_table`` (causal: items of 1 … tiles_m KV tiles) deals the items on the host instead (``item_table``): in windows
of a few rounds' items in item order (so the CTAs running together still share K and V in L2; the last rounds' items
as one window), each item, longest first, to the CTA with the least work so far; the kernel reads its CTA's item count
and list (``%item_rounds``, ``%item_list``). Serpentine rounds leave the longest CTA 3-27% above the average at S = 1k-16k, the table ≤ 1.2%.
"""
from __future__ import annotations

import heapq

import numpy as np

from ptxgen.ir.builder import cdiv, hmin, i32, mul

from ..global_element import load_element
from .config import CONSUMER_ROWS

ITEM_COST = 1.0        # item_table: a work item's cost beyond its KV tiles, in KV tiles (its Q, epilogue, first S)
TABLE_WINDOW_ROUNDS = 2   # item_table: the items dealt together, in rounds of the grid (their K and V shared in L2)
TABLE_TAIL_ROUNDS = 4     # item_table: the last items, dealt as one window (the CTAs' loads even out at the end)


def grid(config) -> tuple:
    """The persistent launch grid: ``(min(tiles_m · %heads · %batches, %ctas), 1, 1)``, tiles_m = ⌈%sq / bm⌉
    (varlen: ⌈%max_sq / bm⌉). ``grid(AttentionConfig(persistent=True))`` = (min(cdiv(%sq, 128) * %heads *
    %batches, %ctas), 1, 1)."""
    rows = "max_sq" if config.varlen else "sq"
    return hmin(mul(mul(cdiv(rows, config.bm), "heads"), "batches"), "ctas"), 1, 1


def kv_tiles_of(m_tile: np.ndarray, bm: int, bn: int, sq: int, sk: int, causal: bool,
                align_bottom: bool = False) -> np.ndarray:
    """The KV tiles query tile ``m_tile`` (an array) sees: ``build.kv_tiles``'s count on the host. ``kv_tiles_of(
    np.arange(3), 128, 128, 300, 300, True)`` = [1, 2, 3]; ``align_bottom`` (``build.bottom_aligned_rows``: shift
    64, rows 0 … 63, 64 … 191, 192 … 299): [1, 2, 3] as well."""
    tiles = -(-sk // bn)
    if not causal:
        return np.full(m_tile.shape, tiles, np.int64)
    shift = (-(-sq // bm) * bm - sq) // CONSUMER_ROWS * CONSUMER_ROWS if align_bottom else 0
    end = (m_tile + 1) * bm - shift
    visible = np.maximum(np.minimum(end, sq) + sk - sq, 0)
    return np.minimum(tiles, -(-visible // bn))


def item_costs(config, heads: int, batches: int, sq: int, sk: int) -> np.ndarray:
    """Each work item's cost as ``item_table`` weighs it, by item number (as ``work_item`` decodes them):
    ``ITEM_COST`` + its KV tiles (``kv_tiles_of``). Causal Sq = Sk = 300 in 128-row tiles, 1 head: [4, 3, 2]."""
    tiles_m = -(-sq // config.bm)
    m_index = np.arange(tiles_m * heads * batches) % tiles_m
    m_tile = tiles_m - 1 - m_index if config.causal else m_index
    return ITEM_COST + kv_tiles_of(m_tile, config.bm, config.bn, sq, sk, config.causal, config.align_bottom)


def item_table(config, heads: int, batches: int, sq: int, sk: int, ctas: int) -> tuple:
    """``item_table``'s (rounds (G,), items (G, R)) int32 for a grid of G = min(items, ctas) CTAs: CTA c runs items
    items[c, :rounds[c]] in that order (the rest of its row −1). Items are numbered as ``work_item`` decodes them; each
    costs ``item_costs``; windows of ``TABLE_WINDOW_ROUNDS``·G consecutive items, and the last ``TABLE_TAIL_ROUNDS``·G
    items as one, are dealt in turn, each window's items longest first to the least loaded CTA (ties: the lower CTA).
    E.g. causal Sq = Sk = 300 in 128-row tiles, 2 heads, 2 CTAs (items of 3, 2, 1 tiles per head): [[0, 1, 2],
    [3, 4, 5]], loads 9 and 9. Post: every item exactly once; the longest CTA's load at most the average plus the
    longest item's cost."""
    cost = item_costs(config, heads, batches, sq, sk)
    items = len(cost)
    grid = min(items, ctas)
    if grid == 0:
        return np.zeros(0, np.int32), np.zeros((0, 1), np.int32)
    index = np.arange(items)
    load = [(0.0, c) for c in range(grid)]
    lists = [[] for _ in range(grid)]
    window, tail = TABLE_WINDOW_ROUNDS * grid, max(items - TABLE_TAIL_ROUNDS * grid, 0)
    bounds = [(start, min(start + window, tail)) for start in range(0, tail, window)] + [(tail, items)]
    for start, stop in bounds:
        chunk = index[start:stop]
        for t in chunk[np.argsort(-cost[chunk], kind="stable")]:
            done, c = heapq.heappop(load)
            lists[c].append(int(t))
            heapq.heappush(load, (done + float(cost[t]), c))
    counts = np.array([len(x) for x in lists], np.int32)
    table = np.full((grid, int(counts.max())), -1, np.int32)
    for c, x in enumerate(lists):
        table[c, :len(x)] = x
    return counts, table


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
    if config.item_table:
        g.rounds = load_element(b, kb["item_rounds"], (g.first,), c0, 1, name="rounds")
        if config.causal:
            g.last_m_tile = b.arith.sub(g.tiles_m, c1, name="last_m_tile")
        return
    if config.pack_lone:
        items = packed_items(g)
    else:
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


def packed_items(g):
    """``AttentionConfig.pack_lone``'s item count, and the values ``packed_item`` decodes by: the last query tile is
    lone (``g.lone``, 1 or 0) where its rows number at most 64 (Sq − (tiles_m − 1)·bm ≤ 64); then each (batch, head)
    pair has ``g.full_tiles`` = tiles_m − 1 items of its own, and each group of w consecutive pairs (the last group
    may hold fewer) ``g.group_items`` = w·full_tiles + 1: its pairs' full tiles, then their lone tiles packed into one
    item. Sq = 1024, bm = 192, 32 heads, 16 batches: 512 pairs × 5 + 171 packed = 2731 items (3072 unpacked)."""
    b, kb, config = g.b, g.kb, g.config
    w = config.consumer_warpgroups
    g.pairs = b.arith.mul(kb["heads"], kb["batches"], name="pairs")
    rest = b.arith.sub(kb["sq"], b.arith.mul(b.arith.sub(g.tiles_m, g.c1, name="full_m_tiles"), g.c_bm,
                                             name="lone_row0"), name="last_tile_rows")
    lone = b.arith.cmp(rest, b.const(CONSUMER_ROWS, i32, name="lone_rows"), pred="le", name="last_tile_lone")
    g.lone = b.arith.select(lone, g.c1, g.c0, name="lone")
    g.full_tiles = b.arith.sub(g.tiles_m, g.lone, name="full_tiles")
    g.c_w = b.const(w, i32, name="group_pairs")
    g.group_items = b.arith.add(b.arith.mul(g.c_w, g.full_tiles, name="group_full_items"), g.lone, name="group_items")
    groups = b.arith.cdiv(g.pairs, g.c_w, name="pair_groups")
    return b.arith.add(b.arith.mul(g.pairs, g.full_tiles, name="full_items"),
                       b.arith.mul(groups, g.lone, name="packed_count"), name="items")


def packed_item(g, t, tag: str) -> None:
    """Item ``t`` under ``pack_lone`` (``packed_items``): group t / group_items, index i = t mod group_items in it;
    i < k·full_tiles (k = the group's pairs, w or fewer in the last group): pair w·group + i / full_tiles, query tile
    i mod full_tiles; else the group's packed item, query tile tiles_m − 1 of pairs w·group … w·group + k − 1. Sets
    ``g.packed`` (i1), ``g.streams`` (k packed, else 1: the K/V streams the item's pipelines interleave),
    ``g.first_pair`` (the item's pair, a packed item's first), ``g.m_tile``, ``g.head``, ``g.batch`` (the first pair's)."""
    b = g.b
    group = b.arith.div(t, g.group_items, name=f"group{tag}")
    i = b.arith.rem(t, g.group_items, name=f"group_index{tag}")
    group_pair = b.arith.mul(group, g.c_w, name=f"group_pair{tag}")
    k = b.arith.min(g.c_w, b.arith.sub(g.pairs, group_pair, name=f"pairs_left{tag}"), name=f"group_pairs_here{tag}")
    g.packed = b.arith.cmp(i, b.arith.mul(k, g.full_tiles, name=f"group_full{tag}"), pred="ge", name=f"packed{tag}")
    g.streams = b.arith.select(g.packed, k, g.c1, name=f"streams{tag}")
    per_pair = b.arith.max(g.full_tiles, g.c1, name=f"per_pair{tag}")   # no division by 0 where every tile is lone
    own_pair = b.arith.add(group_pair, b.arith.div(i, per_pair, name=f"pair_in_group{tag}"), name=f"full_pair{tag}")
    g.first_pair = b.arith.select(g.packed, group_pair, own_pair, name=f"first_pair{tag}")
    g.m_tile = b.arith.select(g.packed, b.arith.sub(g.tiles_m, g.c1, name=f"lone_tile{tag}"),
                              b.arith.rem(i, per_pair, name=f"full_m{tag}"), name=f"m_tile{tag}")
    g.head, g.batch = pair_coords(g, g.first_pair, tag)


def pair_coords(g, pair, tag: str) -> tuple:
    """(head, batch) of (batch, head) pair ``pair`` (heads fastest)."""
    b, kb = g.b, g.kb
    return (b.arith.rem(pair, kb["heads"], name=f"pair_head{tag}"),
            b.arith.div(pair, kb["heads"], name=f"pair_batch{tag}"))


def work_item(g, r, tag: str) -> None:
    """The work item of round ``r`` (serpentine, or ``item_table``'s entry (CTA, r)): sets ``g.m_tile``, ``g.head``,
    ``g.batch`` (values named ``…{tag}``: each role computes its own; ``pack_lone``: ``packed_item``'s values too).
    Post: over the CTAs and their rounds, every item exactly once."""
    b, kb, config = g.b, g.kb, g.config
    if config.item_table:
        t = load_element(b, kb["item_list"], (g.first, r), g.c0, 1, name=f"item{tag}")
    else:
        odd = b.arith.cmp(b.arith.rem(r, g.c2, name=f"round_parity{tag}"), g.c0, pred="ne", name=f"round_odd{tag}")
        position = b.arith.select(odd, g.mirror, g.first, name=f"position{tag}")
        t = b.arith.add(b.arith.mul(r, g.step, name=f"round_start{tag}"), position, name=f"item{tag}")
    if config.pack_lone:
        packed_item(g, t, tag)
        return
    m_index = b.arith.rem(t, g.tiles_m, name=f"m_index{tag}")
    head_batch = b.arith.div(t, g.tiles_m, name=f"head_batch{tag}")
    g.head = b.arith.rem(head_batch, kb["heads"], name=f"head{tag}")
    g.batch = b.arith.div(head_batch, kb["heads"], name=f"batch{tag}")
    # causal: the longest query tiles (the most KV tiles under the diagonal) first
    g.m_tile = b.arith.sub(g.last_m_tile, m_index, name=f"m_tile{tag}") if config.causal else m_index
