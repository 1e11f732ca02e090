"""Which CTA computes what: the persistent grid, the rasterized tile order (``sched.tile`` in groups of tile rows, a
cluster's CTAs taking its BM-row or BN-column parts), stream-K — the tiles of the last, partial wave shared out by
k-tiles, their partial sums added through an f32 workspace ordered by flags — and split-K, a few tiles' k-tiles cut
into slices that run together, joined through the same workspace and flags."""
from __future__ import annotations

from ptxgen.ir.builder import cdiv, frag, hmin, i32, mul

from .config import STREAMK_MIN_SAVING, GemmConfig

# A partial sum is one consumer warpgroup's accumulator, its 128 threads × V values stored as V/4 rows of
# WORK_COLUMNS f32 in which thread t holds columns 4t … 4t+3 (16-byte stores, one 512-byte row per warp instruction)
WORK_COLUMNS = 512


def grid(config: GemmConfig) -> tuple:
    """The launch grid: ``min(tiles, %sms)`` CTAs (whole clusters: ``min(cluster tiles, ⌈%sms/cluster⌉)·cluster``);
    with ``streamk_every_sm`` or ``splitk`` ``%sms`` CTAs (whole clusters) whatever the tile count (split-K's
    tiles·S units are at most ``%sms``; the CTAs past them have no work); a masked grouped GEMM has ``%groups`` times
    the tiles of one group. ``grid(GemmConfig())`` = (min(cdiv(%m, 128) * cdiv(%n, 256), %sms), 1, 1)."""
    ctas = config.cluster_ctas
    if config.streamk_every_sm or config.splitk:
        return ("sms", 1, 1) if ctas == 1 else (mul(cdiv("sms", ctas), ctas), 1, 1)
    rows, columns = config.cluster_tile
    work = mul(cdiv("m", rows), cdiv("n", columns))
    if config.grouped == "masked":   # %m is each group's M_max, the tiles of %groups groups
        work = mul("groups", work)
    if ctas == 1:
        return hmin(work, "sms"), 1, 1
    return mul(hmin(work, cdiv("sms", ctas)), ctas), 1, 1


def tile_of(g, t, names: tuple):
    """(tile row, tile column) of work item ``t``: ``sched.tile`` of the cluster tiles in raster groups; in a
    cluster of cm × cn CTAs, CTA (i, j) (rank i + cm·j) takes tile (tm·cm + i, tn·cn + j) of the cluster tile — a
    1-D cluster its BM-row part (cm = C: tm·C + rank) or its BN-column part (cn = C: tn·C + rank); a part past M or
    N computes a tile that loads zeros and stores nothing. ``names``: (row, column, cluster row, own row), the
    column values named with their "tm" spelled "tn" (``tmc2`` → ``tnc2``)."""
    b = g.b
    cm, cn = g.config.cluster_grid
    tm, tn = b.sched.tile(t, g.tiles_m, g.tiles_n, group=g.config.group, name=[names[0], names[1]])
    if cn > 1:
        column_names = [name.replace("tm", "tn", 1) for name in names[2:]]
        tn = b.arith.add(b.arith.mul(tn, g.c_cn, name=column_names[0]), g.rank_j, name=column_names[1])
    if cm > 1:
        tm = b.arith.add(b.arith.mul(tm, g.c_cm, name=names[2]), g.rank_i, name=names[3])
    return tm, tn


# a moved last tile starts at a multiple of this many elements: where its side is a tensor's contiguous mode (an
# MN-major A or B, C's rows, a column-major C) TMA boxes start 16-byte aligned, which 16 elements are in every
# element type (fp8 1 byte … f32 4)
EDGE_ALIGN = 16


def edges_clamped(config: GemmConfig) -> bool:
    """Whether ``config``'s kernel moves its last tile row (column) back to end at M (N) where M ≥ BM (N ≥ BN): its
    data-parallel and split-K tiles (every copy of a row computes it in the same k order, so the rows two tiles share
    get the same bits from both), not stream-K's (a shared row's k-ranges differ by tile), block scales' or grouped
    GEMMs' (their scale blocks and groups are aligned to the tile grid). ``edges_clamped(GemmConfig())`` = True,
    ``edges_clamped(GemmConfig(streamk=True))`` = False."""
    return not config.streamk and config.scales != "block" and config.grouped == "none"


def edge_alignment(config: GemmConfig) -> tuple:
    """(rows, columns): the multiples a moved last tile starts at. ``EDGE_ALIGN`` each, and for rows of an fp8
    kernel whose warpgroups promote half a chunk apart (``promote`` > 1), a whole warpgroup's rows (``rows``), so
    that each 64-row (128-row) block of C keeps the same promotion offset in every tile that computes it
    (``promotion_stagger``). ``edge_alignment(GemmConfig())`` = (16, 16); e4m3 ``h128x128s4k4t`` → (64, 16)."""
    staggered = config.fp8 and config.scales == "tensor" and config.promote > 1
    return (max(EDGE_ALIGN, config.rows) if staggered else EDGE_ALIGN), EDGE_ALIGN


def edge_start(b, extent, box, zero, align: int, name: str):
    """The first row (column) of a moved last tile: max(⌈(extent − box) / ``align``⌉ · ``align``, 0), the first
    aligned start from which the box still reaches the extent's end — M = 319, BM = 128, ``align`` 16: 192 (rows
    192 … 319, row 319 zero-filled past the tensor); M = 100: 0. Post: start ≤ the last tile's own start (``align``
    divides BM), start + box ≥ extent."""
    over = b.arith.sub(extent, box, name=f"{name}_less_box")
    up = b.arith.add(over, b.const(align - 1, i32, name=f"{name}_align_less1"), name=f"{name}_up")
    blocks = b.arith.div(up, b.const(align, i32, name=f"{name}_align"), name=f"{name}_blocks")
    aligned = b.arith.mul(blocks, b.const(align, i32, name=f"{name}_align2"), name=f"{name}_aligned")
    return b.arith.max(aligned, zero, name=f"{name}_edge")


def promotion_stagger(g, tm):
    """Which half-chunk offset the consumer warpgroup's fp8 promotion takes in tile row ``tm`` (0 or 1): its
    warpgroup index ``cw``, or where ``edges_clamped`` the parity of its first row's ``rows``-block in C — the same
    for every tile of the kernel's fixed grid (a tile's first row is a multiple of BM = 2 · ``rows``) and, in a moved
    last tile (started at a multiple of ``rows``: ``edge_alignment``), the offset the tile before it gave those
    rows, so that rows two tiles share get the same bits from both."""
    b = g.b
    if not edges_clamped(g.config):
        return g.cw
    first = b.arith.add(_tile_start(g, tm, "m", "stagger_m0"), g.row_off, name="stagger_r0")
    block = b.arith.div(first, g.c_rows, name="stagger_block")
    return b.arith.rem(block, b.const(2, i32, name="two"), name="stagger_parity")


def tile_origin(g, tm, tn, names: tuple):
    """(first row, first column) of tile (tm, tn) in C (and the A rows / B rows it loads): (tm·BM, tn·BN), or where
    ``edges_clamped`` (min(tm·BM, ``edge_start`` of M), min(tn·BN, ``edge_start`` of N)): the last tile row of
    M = 319 with BM = 128 starts at row 192, not 256. Why: TMA fills a box's rows past the tensor with zeros at a
    fraction of the rate it loads rows (a tile of 1 valid row in 128 ran 1.6 times as long as a full one;
    docs/gpu-runs/2026-11-28-s35.log section 2), and the moved tile loads only real rows; the rows it shares with the
    tile before it are computed and stored twice with the same bits. The edges are computed where used, from %m and
    %n, not held in registers across the kernel. ``names``: (row, column) value names."""
    return _tile_start(g, tm, "m", names[0]), _tile_start(g, tn, "n", names[1])


def _tile_start(g, index, side: str, name: str):
    """``tile_origin`` along one side: tile ``index``'s first row (``side`` "m") or column ("n")."""
    b, config = g.b, g.config
    box = g.c_bm if side == "m" else g.c_bn
    start = b.arith.mul(index, box, name=name)
    if not edges_clamped(config):
        return start
    align = edge_alignment(config)[0 if side == "m" else 1]
    edge = edge_start(b, g.kb[side], box, g.c0, align, f"{name}_{side}")
    return b.arith.min(start, edge, name=f"{name}_edge")


def streamk_ktiles_saved(m: int, n: int, k: int, config: GemmConfig, ctas: int) -> int:
    """The host's copy of ``streamk_split``'s test: how many k-tiles stream-K takes off the last wave of an
    (m, n, k) problem on ``ctas`` CTAs (0 when the tiles fill whole waves); the kernel shares the last wave out
    where this is at least ``streamk_min_saving``. E.g. 8192³ bf16, 128 × 256 tiles on 132 CTAs: 2048 tiles, the
    last wave 68 tiles of 128 k-tiles shared by 132 → runs of 66: 62 k-tiles saved."""
    ktiles = -(-k // config.k_tile)
    clusters = -(-ctas // config.cluster_ctas)
    rows, columns = config.cluster_tile
    tiles = -(-m // rows) * -(-n // columns)
    step = clusters if config.streamk_every_sm else min(tiles, clusters)
    if not tiles or not step:
        return 0
    rest = tiles % step
    if not rest:
        return 0
    units = max(min(step, rest * ktiles), 1)
    return ktiles - -(-(rest * ktiles) // units)


def work_tv(values: int):
    """The TV layout of a partial sum over its (values/4, WORK_COLUMNS) block: thread t, value v → row v // 4, column
    4t + v % 4. ``work_tv(128)`` = (128,(4,32)):(128,(32,1)); post: a bijection onto the block."""
    import layoutc as lc

    return lc.Layout((128, (4, values // 4)), (values, (values // 4, 1)))


def streamk_buffers(config: GemmConfig, ctas: int) -> dict:
    """The shapes of the stream-K or split-K kernel's ``work`` (f32, any contents) and ``flags`` (i32, ZERO before
    the first launch; every launch leaves them zero) for a grid of at most ``ctas`` CTAs: each cluster writes at most
    two partial sums (the head of one tile, the tail of another), each of its CTAs' two consumer warpgroups one
    block; one flag per (tile of the last wave, CTA rank, consumer thread). Split-K's unit u (at most ``ctas`` of
    them, one CTA each) writes its sum in slot 2u, and tile t (fewer than ``ctas``) flags (t, 0, thread).
    ``streamk_buffers(GemmConfig(streamk=True), 132)`` = {"work": (16896, 512), "flags": (33792,)}."""
    clusters = ctas // config.cluster_ctas
    values = (config.columns // 2) * (config.rows // 64)
    return {"work": (clusters * 2 * config.cluster_ctas * 2 * (values // 4), WORK_COLUMNS),
            "flags": (clusters * config.cluster_ctas * 256,)}


def streamk_split(b, first, step, tiles, ktiles, c0, c1, cluster: int, min_saving: int = STREAMK_MIN_SAVING) -> dict:
    """The work of cluster ``first`` of ``step``: the data-parallel tiles first, b, b + step, … below ``dp_tiles``,
    then an equal share of the k-tiles of the last ``tiles - dp_tiles`` tiles (numbered in k-tile order across
    tiles): units = min(step, those k-tiles) clusters take runs [s, e) = [c·total/units, (c+1)·total/units), each
    within at most two tiles (a run is shorter than a tile). ``dp_tiles`` is ``tiles - tiles % step`` (whole waves)
    when the longest run is at least ``min_saving`` k-tiles shorter than a tile, else ``tiles`` (no stream-K). A
    run's pieces go LAST tile first, so that the piece finishing a tile is a cluster's last work: the earlier
    clusters' pieces of that tile were their first (or only) ones. → the values the items and the join need."""
    rest = b.arith.rem(tiles, step, name="rest_tiles")
    rest_ktiles = b.arith.mul(rest, ktiles, name="rest_ktiles")
    rest_units = b.arith.max(b.arith.min(step, rest_ktiles, name="rest_units0"), c1, name="rest_units")
    longest = b.arith.cdiv(rest_ktiles, rest_units, name="longest_run")
    saving = b.arith.sub(ktiles, longest, name="saving")
    pays = b.arith.cmp(saving, b.const(min_saving, i32, name="min_saving"), pred="ge", name="sk_pays")
    sk_tiles = b.arith.select(pays, rest, c0, name="sk_tiles")
    dp_tiles = b.arith.sub(tiles, sk_tiles, name="dp_tiles")
    # a cluster past the data-parallel tiles has none left; cdiv is defined for dividends >= 0 only
    dp_left = b.arith.max(b.arith.sub(dp_tiles, first, name="dp_after"), c0, name="dp_left")
    dp_items = b.arith.cdiv(dp_left, step, name="dp_items")
    total = b.arith.mul(sk_tiles, ktiles, name="sk_ktiles")
    units = b.arith.max(b.arith.min(step, total, name="sk_units0"), c1, name="sk_units")
    ktiles_1 = b.arith.max(ktiles, c1, name="ktiles_1")
    start = b.arith.div(b.arith.mul(first, total, name="sk_s0"), units, name="sk_start")
    end = b.arith.div(b.arith.mul(b.arith.add(first, c1, name="sk_next"), total, name="sk_e0"), units, name="sk_end")
    first_tile = b.arith.div(start, ktiles_1, name="sk_first_tile")
    last_tile = b.arith.div(b.arith.sub(end, c1, name="sk_last_k"), ktiles_1, name="sk_last_tile")
    # clusters past the units (fewer k-tiles left than clusters) have no run
    in_sk = b.arith.and_(b.arith.cmp(start, end, pred="lt", name="nonempty_run"),
                         b.arith.cmp(first, units, pred="lt", name="a_unit"), name="in_sk")
    pieces = b.arith.select(in_sk, b.arith.add(b.arith.sub(last_tile, first_tile, name="sk_span"), c1,
                                               name="sk_pieces1"), c0, name="sk_pieces")
    items = b.arith.add(dp_items, pieces, name="items")
    return {"first": first, "step": step, "dp_tiles": dp_tiles, "dp_items": dp_items, "total": total,
            "units": units, "ktiles_1": ktiles_1, "start": start, "end": end, "first_tile": first_tile,
            "last_tile": last_tile, "items": items, "cluster": cluster, "c0": c0, "c1": c1}


def streamk_item(b, split, i, ktiles, c0, tag: str):
    """Work item ``i`` of the cluster: → (work index, first k-tile, end k-tile); values named ``…_{tag}``."""
    sk = b.arith.cmp(i, split["dp_items"], pred="ge", name=f"is_sk_{tag}")
    piece = b.arith.sub(i, split["dp_items"], name=f"piece_{tag}")
    j = b.arith.sub(split["last_tile"], piece, name=f"sk_j_{tag}")
    t_sk = b.arith.add(split["dp_tiles"], j, name=f"t_sk_{tag}")
    t_dp = b.arith.add(split["first"], b.arith.mul(i, split["step"], name=f"dp_off_{tag}"), name=f"t_dp_{tag}")
    jk = b.arith.mul(j, ktiles, name=f"sk_jk_{tag}")
    lo = b.arith.max(b.arith.sub(split["start"], jk, name=f"lo0_{tag}"), c0, name=f"lo_sk_{tag}")
    hi = b.arith.min(b.arith.sub(split["end"], jk, name=f"hi0_{tag}"), ktiles, name=f"hi_sk_{tag}")
    return (b.arith.select(sk, t_sk, t_dp, name=f"t_{tag}"), b.arith.select(sk, lo, c0, name=f"lo_{tag}"),
            b.arith.select(sk, hi, ktiles, name=f"hi_{tag}"))


def _partial_block(b, kb, split, unit, piece, rank, cw, values: int, name: str):
    """The workspace block of the partial sum of (cluster ``unit``, its piece ``piece``, CTA ``rank``, warpgroup
    ``cw``)."""
    c2 = b.const(2, i32, name=f"c2_{name}")
    slot = b.arith.add(b.arith.mul(unit, c2, name=f"slot0_{name}"), piece, name=f"slot_{name}")
    cta = b.arith.add(b.arith.mul(slot, b.const(split["cluster"], i32, name=f"ncta_{name}"), name=f"cta0_{name}"),
                      rank, name=f"cta_{name}")
    block = b.arith.add(b.arith.mul(cta, c2, name=f"wgb0_{name}"), cw, name=f"wgb_{name}")
    row = b.arith.mul(block, b.const(values // 4, i32, name=f"rows_{name}"), name=f"row_{name}")
    return b.gmem.tile(kb["work"], row, split["c0"], shape=(values // 4, WORK_COLUMNS), name=f"block_{name}")


def _flag(b, split, j, rank, cw, lt, name: str):
    """The flag of (last-wave tile j, CTA rank, consumer thread cw·128 + lt)."""
    cta = b.arith.add(b.arith.mul(j, b.const(split["cluster"], i32, name=f"fcta_{name}"), name=f"fj_{name}"), rank,
                      name=f"fr_{name}")
    wgs = b.arith.add(b.arith.mul(cta, b.const(2, i32, name=f"fc2_{name}"), name=f"fw0_{name}"), cw,
                      name=f"fw_{name}")
    return b.arith.add(b.arith.mul(wgs, b.const(128, i32, name=f"f128_{name}"), name=f"ft0_{name}"), lt,
                       name=f"flag_{name}")


def streamk_contribute(b, kb, split, ct, acc, rank, cw, lt, acc_t):
    """A piece that does not finish its tile: store the partial sum, then signal (release) the tile's flag."""
    j = b.arith.sub(ct, split["dp_tiles"], name="cj")
    piece = b.arith.sub(j, split["first_tile"], name="cpiece")
    block = _partial_block(b, kb, split, split["first"], piece, rank, cw, acc_t.size, "own")
    # streamk_buffers sizes the workspace for every block: no bound to compare (unchecked)
    b.gmem.store(block, lt, acc, tv=work_tv(acc_t.size), unchecked=True)
    b.gmem.signal(kb["flags"], _flag(b, split, j, rank, cw, lt, "own"), split["c1"])


def streamk_join(b, kb, split, ct, acc, ktiles, rank, cw, lt, acc_t):
    """The piece that finishes its tile: wait until every cluster with an earlier piece of it signalled (acquire),
    add their partial sums (clusters c_lo … this one − 1, in k order), and reset the flag. → the tile's sum."""
    c1 = split["c1"]
    j = b.arith.sub(ct, split["dp_tiles"], name="jj")
    head = b.arith.add(b.arith.mul(j, ktiles, name="jk0"), c1, name="jk1")
    c_lo = b.arith.div(b.arith.sub(b.arith.mul(head, split["units"], name="jku"), c1, name="jku1"), split["total"],
                       name="c_lo")
    others = b.arith.sub(split["first"], c_lo, name="others")
    flag = _flag(b, split, j, rank, cw, lt, "join")
    b.gmem.wait(kb["flags"], flag, others)
    with b.scf.for_(c_lo, split["first"], c1, acc, args=("unit", "sum_in"), names=["sum"]) as loop:
        unit, sum_in = loop
        unit_start = b.arith.div(b.arith.mul(unit, split["total"], name="us0"), split["units"], name="unit_start")
        piece = b.arith.sub(j, b.arith.div(unit_start, split["ktiles_1"], name="unit_tile"), name="unit_piece")
        block = _partial_block(b, kb, split, unit, piece, rank, cw, acc_t.size, "other")
        part = b.gmem.load(block, lt, tv=work_tv(acc_t.size), type=acc_t, unchecked=True, name="part")
        b.scf.yield_(b.frag.add(sum_in, part, name="sum_out"))
    b.gmem.signal(kb["flags"], flag, b.arith.sub(split["c0"], others, name="unsignal"))
    return loop.results[0]


def splitk_slices(m: int, n: int, k: int, config: GemmConfig, ctas: int) -> int:
    """The host's copy of ``splitk_split``'s S: the k-slices per tile of an (m, n, k) problem on ``ctas`` CTAs,
    max(1, min(⌊ctas/tiles⌋, k-tiles)). E.g. bf16 640 × 1536 × 13824, 128 × 256 tiles on 132 SMs: 30 tiles → 4
    slices of 54 k-tiles (120 CTAs); 128 × 128 tiles: 60 → 2; 768 × 1536 with 128 × 128 tiles: 72 → 1."""
    tiles = -(-m // config.bm) * -(-n // config.bn)
    ktiles = -(-k // config.k_tile)
    return max(1, min(ctas // max(tiles, 1), ktiles))


def splitk_split(b, first, step, tiles, ktiles, sms, c0, c1) -> dict:
    """Split-K's slices, computed in the kernel from the tile count and ``%sms``: S = max(1, min(⌊sms/tiles⌋,
    ktiles)) slices per tile (none empty: S ≤ ktiles), units = tiles·S (≤ sms where S > 1), unit u = s·tiles + t
    taking slice s of tile t, so that the tiles' units of one slice are consecutive CTAs, running together over the
    same k range of A and B. E.g. 30 tiles of 216 k-tiles on 132 SMs: S = 4, 120 units of 54 k-tiles. With S = 1
    the units are the tiles, walked persistently (first, first + step, …). → the values the items and the join
    need."""
    per_tile = b.arith.div(sms, b.arith.max(tiles, c1, name="tiles_1"), name="sms_per_tile")
    slices = b.arith.max(b.arith.min(per_tile, ktiles, name="slices0"), c1, name="slices")
    units = b.arith.mul(tiles, slices, name="units")
    last_slice = b.arith.sub(slices, c1, name="last_slice")
    return {"first": first, "step": step, "tiles": tiles, "slices": slices, "units": units,
            "last_slice": last_slice, "cluster": 1, "c0": c0, "c1": c1}


def splitk_item(b, split, u, ktiles, tag: str):
    """Unit ``u``: → (tile t = u mod tiles, first k-tile s·ktiles/S, end k-tile (s+1)·ktiles/S, slice s = u / tiles);
    values named ``…_{tag}``. The slices of a tile cover its k-tiles exactly once (integer division)."""
    t = b.arith.rem(u, split["tiles"], name=f"zt_{tag}")
    s = b.arith.div(u, split["tiles"], name=f"zs_{tag}")
    lo = b.arith.div(b.arith.mul(s, ktiles, name=f"zk0_{tag}"), split["slices"], name=f"zlo_{tag}")
    hi = b.arith.div(b.arith.mul(b.arith.add(s, split["c1"], name=f"zs1_{tag}"), ktiles, name=f"zk1_{tag}"),
                     split["slices"], name=f"zhi_{tag}")
    return t, lo, hi, s


def splitk_contribute(b, kb, split, u, t, acc, cw, lt, acc_t):
    """A unit of an earlier slice: store the partial sum in unit ``u``'s workspace block, then signal (release) the
    flag of tile ``t`` (each consumer thread its own: no barrier between the store and the signal)."""
    block = _partial_block(b, kb, split, u, split["c0"], split["c0"], cw, acc_t.size, "zown")
    # streamk_buffers sizes the workspace for every unit: no bound to compare (unchecked)
    b.gmem.store(block, lt, acc, tv=work_tv(acc_t.size), unchecked=True)
    b.gmem.signal(kb["flags"], _flag(b, split, t, split["c0"], cw, lt, "zown"), split["c1"])


def splitk_join(b, kb, split, t, acc, cw, lt, acc_t):
    """The unit of tile ``t``'s last slice (the longest, ⌈ktiles/S⌉ k-tiles, and the last CTAs of the grid — the
    earlier slices' units start no later and finish no later, so its wait is short, and it waits only for CTAs
    before it in grid order): wait (acquire) until the S − 1 others signalled, add their partial sums in slice order
    0 … S − 2 to its own (a fixed order: the same result every launch), and reset the flag. → the tile's sum."""
    c1 = split["c1"]
    others = split["last_slice"]
    flag = _flag(b, split, t, split["c0"], cw, lt, "zjoin")
    b.gmem.wait(kb["flags"], flag, others)
    with b.scf.for_(split["c0"], others, c1, acc, args=("zslice", "zsum_in"), names=["zsum"]) as loop:
        slice_, sum_in = loop
        unit = b.arith.add(b.arith.mul(slice_, split["tiles"], name="zu0"), t, name="zunit")
        block = _partial_block(b, kb, split, unit, split["c0"], split["c0"], cw, acc_t.size, "zother")
        part = b.gmem.load(block, lt, tv=work_tv(acc_t.size), type=acc_t, unchecked=True, name="zpart")
        b.scf.yield_(b.frag.add(sum_in, part, name="zsum_out"))
    b.gmem.signal(kb["flags"], flag, b.arith.sub(split["c0"], others, name="zunsignal"))
    return loop.results[0]


def produce_tiles(g, produce, read_ahead=None) -> None:
    """The producer's walk over its work items: ``produce(t, lo, hi, it)`` issues the loads of k-tiles lo … hi-1 of
    work item t from iteration ``it`` on; the counter runs across items (stream-K items: ``streamk_item``).
    ``read_ahead(t, tag)`` (a grouped GEMM's ``group_ahead``): a value of work item t that its loads need — read for
    the NEXT item before this one's loads are issued, carried, and passed as ``produce(t, lo, hi, it, value)``, so
    that its global load's latency is not between two tiles' loads."""
    b, c0, c1 = g.b, g.c0, g.c1
    if read_ahead is not None:
        first_value = read_ahead(g.first, "first")
        with b.scf.for_(g.first, g.tiles, g.step, c0, first_value, args=("t", "it", "ahead"),
                        names=["it_done", "ahead_last"]) as (t, it, value):
            following = read_ahead(b.arith.add(t, g.step, name="t_next"), "next")
            b.scf.yield_(produce(t, c0, g.ktiles, it, value), following)
    elif g.config.splitk:
        with b.scf.for_(g.first, g.split["units"], g.step, c0, args=("u", "it"), names=["it_done"]) as (u, it):
            t, lo, hi, _slice = splitk_item(b, g.split, u, g.ktiles, "p")
            b.scf.yield_(produce(t, lo, hi, it))
    elif g.config.streamk:
        with b.scf.for_(c0, g.split["items"], c1, c0, args=("i", "it"), names=["it_done"]) as (i, it):
            t, lo, hi = streamk_item(b, g.split, i, g.ktiles, c0, "p")
            b.scf.yield_(produce(t, lo, hi, it))
    else:
        with b.scf.for_(g.first, g.tiles, g.step, c0, args=("t", "it"), names=["it_done"]) as (t, it):
            b.scf.yield_(produce(t, c0, g.ktiles, it))


def consume_tiles(g, consume, c_values, store_out) -> None:
    """The consumers' walk over their work items: ``consume(ct, lo, hi, cit, hook)`` → (accumulator, counter, tile
    row, tile column); each finished tile is stored (``store_out(c_values(acc, tm, tn), tm, tn)``): data-parallel;
    stream-K (a piece that does not finish its tile leaves a partial sum, the one that does adds them); or
    ``overlap``: a tile's C held as packed values and stored by the next trip's hook, behind that tile's first
    wgmmas, one trip past the tiles (no k-tiles, tile 0's coordinates) storing the last one."""
    b, kb, config = g.b, g.kb, g.config
    c0, c1, fzero, acc_t = g.c0, g.c1, g.fzero, g.acc_t
    if config.splitk:
        split = g.split
        with b.scf.for_(g.first, split["units"], g.step, c0, args=("cu", "cit"), names=["cit_done"]) as (u, cit):
            ct, lo, hi, s = splitk_item(b, split, u, g.ktiles, "c")
            acc, kit_end, tm2, tn2 = consume(ct, lo, hi, cit)
            finish = b.scf.if_(b.arith.cmp(s, split["last_slice"], pred="eq", name="joins_slices"))
            with finish.then:
                # the last slice's unit: the units of the tile's earlier slices left partial sums
                join = b.scf.if_(b.arith.cmp(s, c0, pred="gt", name="sliced"), types=(acc_t,), names=["whole"])
                with join.then:
                    b.scf.yield_(splitk_join(b, kb, split, ct, acc, g.cw, g.lt, acc_t))
                with join.otherwise:
                    b.scf.yield_(acc)
                store_out(c_values(join.results[0], tm2, tn2), tm2, tn2)
                b.scf.yield_()
            with finish.otherwise:
                splitk_contribute(b, kb, split, u, ct, acc, g.cw, g.lt, acc_t)
                b.scf.yield_()
            b.scf.yield_(kit_end)
    elif config.streamk:
        split = g.split
        with b.scf.for_(c0, split["items"], c1, c0, args=("ci", "cit"), names=["cit_done"]) as (i, cit):
            ct, lo, hi = streamk_item(b, split, i, g.ktiles, c0, "c")
            acc, kit_end, tm2, tn2 = consume(ct, lo, hi, cit)
            finishes = b.arith.cmp(hi, g.ktiles, pred="eq", name="finishes")
            finish = b.scf.if_(finishes)
            with finish.then:
                # the tile's last k-tile is ours: the clusters that ran its earlier k-tiles left partial sums
                joins = b.arith.cmp(lo, c0, pred="gt", name="joins")
                join = b.scf.if_(joins, types=(acc_t,), names=["whole"])
                with join.then:
                    b.scf.yield_(streamk_join(b, kb, split, ct, acc, g.ktiles, g.rank_or_zero, g.cw, g.lt, acc_t))
                with join.otherwise:
                    b.scf.yield_(acc)
                store_out(c_values(join.results[0], tm2, tn2), tm2, tn2)
                b.scf.yield_()
            with finish.otherwise:
                streamk_contribute(b, kb, split, ct, acc, g.rank_or_zero, g.cw, g.lt, acc_t)
                b.scf.yield_()
            b.scf.yield_(kit_end)
    elif config.overlap:
        held0 = b.frag.cast(b.frag.splat(fzero, type=acc_t, name="held_zero"),
                            type=frag(config.out_dtype, acc_t.shape), name="held0")
        trips_end = b.arith.select(b.arith.cmp(g.tiles, c0, pred="gt", name="any_tile"),
                                   b.arith.add(g.tiles, g.step, name="tiles_flush"), g.tiles, name="trips_end")
        with b.scf.for_(g.first, trips_end, g.step, c0, held0, c0, c0,
                        args=("ct", "cit", "held", "held_m", "held_n"),
                        names=["cit_done", "held_last", "held_m_last", "held_n_last"]) as loop:
            ct, cit, held, held_m, held_n = loop
            real = b.arith.cmp(ct, g.tiles, pred="lt", name="real_tile")

            def hook():
                with b.scf.if_(b.arith.cmp(ct, g.first, pred="ne", name="holds_c")).then:
                    store_out(held, held_m, held_n)
                    b.scf.yield_()

            acc, kit_end, tm2, tn2 = consume(b.arith.select(real, ct, c0, name="ct_tile"), c0,
                                             b.arith.select(real, g.ktiles, c0, name="tile_ktiles"), cit, hook)
            b.scf.yield_(kit_end, c_values(acc, tm2, tn2), tm2, tn2)
    else:
        with b.scf.for_(g.first, g.tiles, g.step, c0, args=("ct", "cit"), names=["cit_done"]) as (ct, cit):
            acc, kit_end, tm2, tn2 = consume(ct, c0, g.ktiles, cit)
            store_out(c_values(acc, tm2, tn2), tm2, tn2)
            b.scf.yield_(kit_end)
