"""DeepGEMM's fine-grained fp8 scales inside the GEMM (``GemmConfig(scales="block")``): which scale multiplies each
value of a consumer's accumulator for one k-tile (one 128-deep scale block), read from global memory through TV
layouts derived from the accumulator's.

The problem is C (M, N) = A·Bᵀ with A scaled per (row, 128-wide K block) — ``a_scales`` (M, ⌈K/128⌉), any strides
(row-major, or DeepGEMM's M-major TMA-aligned layout) — and B per 128 × 128 block, ``b_scales`` (⌈N/128⌉, ⌈K/128⌉).
The kernel sees them as ``%row_scales`` (its rows' scales) and ``%col_scales`` (its columns'): unswapped, rows are A's
(one scale per row) and columns B's (one per 128 columns); swapped (``swap_ab``: the kernel computes Cᵀ = B·Aᵀ),
rows are B's (one per 128 rows: a tile of BM = 128 or 256 rows starts on a block, so each warpgroup's rows share
one) and columns A's (one per column).

A tile of BN columns that does not divide 128 (112, 160, 176, 192, 224, …) starts at n0 = tn·BN, which lies
``n0 % 128`` columns into a B scale block, and straddles two or three blocks: which block a column belongs to is not
a layout of the column. The kernel then loads the scale of each block the tile touches (blocks ``n0 // 128 + i``,
one value each, read by every thread) and gives each value the one of its column's block: the tile's 8-column group
j (a tile starts on a multiple of 8 columns: BN is; ``frag.coords`` of ``column_group_tv``) lies in block i + 1 or
later exactly when j ≥ 16·(i + 1) − (n0 % 128)/8 — a select per boundary, so a k-tile's column scales are
``column_windows(BN)`` loads and a few registers whatever BN.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import layoutc as lc
from layoutc.hopper import wgmma_accumulator_tv

from ptxgen.ir.builder import f32, frag, gtensor, i32, smem, tmap

from ..global_element import load_element
from .config import SCALE_BLOCK, GemmConfig


def _accumulator_modes(rows: int, bn: int):
    """The accumulator's TV shape, ((4,8,4),((2,2,BN/8),P)) (see ``epilogue.accumulator_block_tv``)."""
    return ((4, 8, 4), ((2, 2, bn // 8), rows // 64))


def row_tv(rows: int, bn: int):
    """Thread t, value v of the (rows, BN) accumulator → its ROW (an index into a (rows, 1) window).
    ``row_tv(64, 16)`` = ((4,8,4),((2,2,2),1)):((0,1,16),((0,8,0),64))."""
    return lc.Layout(_accumulator_modes(rows, bn), ((0, 1, 16), ((0, 8, 0), 64)))


def column_tv(rows: int, bn: int):
    """Thread t, value v of the (rows, BN) accumulator → its COLUMN (an index into a (BN, 1) window).
    ``column_tv(64, 16)`` = ((4,8,4),((2,2,2),1)):((2,0,0),((1,0,8),0))."""
    return lc.Layout(_accumulator_modes(rows, bn), ((2, 0, 0), ((1, 0, 8), 0)))


def column_group_tv(rows: int, bn: int):
    """Thread t, value v of the (rows, BN) accumulator → its column's group of 8 (an index into a (BN/8, 1, 1) window).
    ``column_group_tv(64, 16)`` = ((4,8,4),((2,2,2),1)):((0,0,0),((0,0,1),0))."""
    return lc.Layout(_accumulator_modes(rows, bn), ((0, 0, 0), ((0, 0, 1), 0)))


def uniform_tv(rows: int, bn: int):
    """Every (thread, value) → element 0 of a (1, 1) window: one scale for the whole accumulator."""
    return lc.Layout(_accumulator_modes(rows, bn), ((0, 0, 0), ((0, 0, 0), 0)))


def column_block_tv(rows: int, bn: int):
    """BN a multiple of 128: thread t, value v → the 128-column block of its column (an index into a
    (BN/128, 1) window); column 8j + … lies in block j // 16. ``column_block_tv(64, 256)`` =
    ((4,8,4),((2,2,(16,2)),1)):((0,0,0),((0,0,(0,1)),0))."""
    return lc.Layout(((4, 8, 4), ((2, 2, (16, bn // SCALE_BLOCK)), rows // 64)),
                     ((0, 0, 0), ((0, 0, (0, 1)), 0)))


GROUPS = SCALE_BLOCK // 8   # 8-column groups per B scale block


def straddles(config: GemmConfig) -> bool:
    """Whether a tile's columns may lie in different B scale blocks at offsets known only at run time: unswapped, BN
    neither a divisor nor a multiple of 128. ``BN = 192`` straddles (a tile at n0 = 192 covers blocks 1 and 2),
    ``BN = 64`` or ``256`` does not. Post: True only where the scale read needs run-time block offsets."""
    return not config.swap_ab and SCALE_BLOCK % config.bn != 0 and config.bn % SCALE_BLOCK != 0


def column_windows(bn: int) -> int:
    """The most B scale blocks a tile of BN columns touches: tiles start at multiples of BN, so ``n0 % 128`` is a
    multiple of g = gcd(BN, 128), at most 128 - g. ``column_windows(192)`` = 2, ``column_windows(224)`` = 3."""
    g = math.gcd(bn, SCALE_BLOCK)
    return -(-(SCALE_BLOCK - g + bn) // SCALE_BLOCK)


def column_blocks(config: GemmConfig) -> int:
    """B scale blocks one tile reads per k-tile (unswapped): BN/128 for a multiple of 128, ``column_windows(BN)`` for
    a straddling BN, else 1. ``column_blocks(GemmConfig("e4m3", bn=256, scales="block"))`` = 2."""
    if config.bn % SCALE_BLOCK == 0:
        return config.bn // SCALE_BLOCK
    return column_windows(config.bn) if straddles(config) else 1


def scale_parts(config: GemmConfig) -> int:
    """How many fragments ``scale_loads`` (and ``stage_scale_loads``) give: the row scales and one column part, or
    one per window of a straddling tile. ``scale_parts(bn=192)`` = 3."""
    return 1 + (column_windows(config.bn) if straddles(config) else 1)


# ``scales_smem``: B's scales of one stage are one TMA box of column_blocks rows × this many k-blocks (16 bytes: TMA's
# least box row). A TMA box must START 16-byte aligned along the contiguous mode too (else the copy faults with an
# illegal instruction), so k-tile kt's box starts at k-block 4·⌊kt/4⌋ and the stage's k-block is its column kt mod 4
B_BOX_K_BLOCKS = 4


def _token_box(width: int):
    """A stage's box of A's per-token scales over the global (⌈K/128⌉, M) modes: one k-block, ``width`` tokens,
    (1, width):(width, 1)."""
    return lc.Layout((1, width), (width, 1))


def _block_box(blocks: int):
    """A stage's box of B's block scales over the global (⌈N/128⌉, ⌈K/128⌉) modes: (blocks, 4):(4, 1) — k-tile kt's
    stage holds k-blocks 4·⌊kt/4⌋ … 4·⌊kt/4⌋ + 3 (the box starts on a 16-byte boundary, as TMA requires), its own
    in column kt mod 4 (``box_k_start``, ``box_k_column``)."""
    return lc.Layout((blocks, B_BOX_K_BLOCKS), (B_BOX_K_BLOCKS, 1))


def row_scale_box(config: GemmConfig):
    """``scales_smem``: the smem layout of one stage's kernel-ROW scales as TMA writes it: unswapped, A's BM
    per-token scales over the global (⌈K/128⌉, M) modes, (1, BM):(BM, 1); swapped (``swap_ab``: the kernel's rows
    are B's), B's BM/128 blocks over (⌈N/128⌉, ⌈K/128⌉), (BM/128, 4):(4, 1).
    ``row_scale_box(bm=128, swap_ab=True)`` = (1,4):(4,1)."""
    if config.swap_ab:
        return _block_box(config.bm // SCALE_BLOCK)
    return _token_box(config.bm)


def col_scale_box(config: GemmConfig):
    """``scales_smem``: the smem layout of one stage's kernel-COLUMN scales: unswapped, B's blocks over the global
    (⌈N/128⌉, ⌈K/128⌉) modes, (W, 4):(4, 1) with W = ``column_blocks``; swapped, A's per-token scales of the
    tile's BN columns over (⌈K/128⌉, M), (1, BN):(BN, 1) (a box start tn·BN along the contiguous M: 16-byte
    aligned, BN being a multiple of 8). ``col_scale_box(bn=128)`` = (1,4):(4,1); ``col_scale_box(bn=32,
    swap_ab=True)`` = (1,32):(32,1)."""
    if config.swap_ab:
        return _token_box(config.bn)
    return _block_box(column_blocks(config))


def stage_scale_bytes(config: GemmConfig) -> int:
    """The bytes ``scales_smem``'s two TMA loads deliver per stage (boxes in full, zero fill included):
    BM · 4 + W · 16 unswapped, BM/128 · 16 + BN · 4 swapped."""
    return (lc.size(row_scale_box(config)) + lc.size(col_scale_box(config))) * 4


def parameters(config: GemmConfig) -> dict:
    """The kernel's scale parameters: ``%row_scales`` (rank 2; masked: (G, M_max, ⌈K/128⌉)) and ``%col_scales``
    (rank 2) — with ``scales_smem`` two TMA maps instead (swapped, ``swap_ab``: the same two maps with their roles
    turned, ``%row_scales`` over B's blocks with box ``row_scale_box``, ``%col_scales`` over A's (⌈K/128⌉, M) with
    box ``col_scale_box``): ``%row_scales`` over A's scales as a row-major
    (⌈K/128⌉, M) tensor (DeepGEMM's M-major TMA-aligned layout, transposed; masked: (G·⌈K/128⌉, M_max), the same
    layout per group, group g's k-block kb in row g·⌈K/128⌉ + kb), box
    ``row_scale_box``, and ``%col_scales`` over B's (⌈N/128⌉, ⌈K/128⌉) (grouped: (G·⌈N/128⌉, ⌈K/128⌉)) with
    16-byte-aligned rows, box ``col_scale_box``; grouped GEMMs (``grouped``): contiguous
    ``%m_indices`` (i32 (M,): each row's group, -1 padding); masked ``%masked_m`` (i32 (G,): each group's rows),
    ``%m_window`` (i32 (M_max,), stride 0: any i32 values; its extent bounds a group's rows, see ``row_validity``),
    ``%groups``. Post: the types ``build`` declares."""
    if config.scales_smem:
        params = {"row_scales": tmap("f32", 2, row_scale_box(config)),
                  "col_scales": tmap("f32", 2, col_scale_box(config))}
    else:
        params = {"row_scales": gtensor("f32", 3 if config.grouped == "masked" else 2),
                  "col_scales": gtensor("f32", 2)}
    if config.grouped == "contiguous":
        params["m_indices"] = gtensor("i32", 1)
    elif config.grouped == "masked":
        params.update(masked_m=gtensor("i32", 1), m_window=gtensor("i32", 1), groups=i32)
    return params


def group_read(g, tm, thread, threads: int, tag: str):
    """The one global value ``tile_group`` reads for tile row ``tm``: contiguous ``%m_indices[tm·BM]`` (the group of
    the tile's first row, -1 for padding), masked ``%masked_m[tm / tiles per group]`` (the group's rows); a tile row
    past the problem reads 0 (``load_element``). ``group_ahead`` issues it a tile early. Post: an i32 scalar."""
    b, kb, config = g.b, g.kb, g.config
    if config.grouped == "contiguous":
        m0 = b.arith.mul(tm, g.c_bm, name=f"gm0_{tag}")
        return load_element(b, kb["m_indices"], (m0,), thread, threads, name=f"group_raw_{tag}")
    group = b.arith.div(tm, g.group_tiles_m, name=f"group_of_{tag}")
    return load_element(b, kb["masked_m"], (group,), thread, threads, name=f"group_rows_{tag}")


def tile_group(g, tm, thread, threads: int, tag: str, read=None):
    """The group of tile row ``tm`` of a grouped GEMM and whether the tile has rows to compute: contiguous — the
    group of the tile's first row (``%m_indices[tm·BM]``; a padding row's -1 reads as group 0: its rows compute
    zeros, see ``row_validity``), every tile computed; masked — tm / tiles per group, computed when its first row
    lies below ``%masked_m`` of the group. ``read``: ``group_read``'s value for ``tm`` where the caller loaded it
    already (None: loaded here). → (group i32, i1 or None, the masked tile's (first local row, rows))."""
    b, config = g.b, g.config
    if read is None:
        read = group_read(g, tm, thread, threads, tag)
    if config.grouped == "contiguous":
        return b.arith.max(read, g.c0, name=f"group_{tag}"), None, None
    group = b.arith.div(tm, g.group_tiles_m, name=f"group_{tag}")
    local0 = b.arith.mul(b.arith.rem(tm, g.group_tiles_m, name=f"gtm_{tag}"), g.c_bm, name=f"local0_{tag}")
    return group, b.arith.cmp(local0, read, pred="lt", name=f"has_rows_{tag}"), (local0, read)


def row_reads(g, tm, masked_rows):
    """The global loads that tell which of this warpgroup's rows of tile row ``tm`` belong to their group, i32
    fragments in the accumulator's shape, nothing computed from them: contiguous [the rows' ``%m_indices``];
    masked [the ``%m_window`` window placed so that exactly the rows below ``%masked_m[group]`` are inside, loaded
    with ``other`` 0, then with ``other`` 1] (see ``row_validity``)."""
    b, kb, config = g.b, g.kb, g.config
    rows, bn = config.rows, config.bn
    tv = row_tv(rows, bn)
    ints = frag("i32", g.acc_t.shape)
    if config.grouped == "contiguous":
        r0 = b.arith.add(b.arith.mul(tm, g.c_bm, name="v_m0"), g.row_off, name="v_r0")
        return [b.gmem.load(b.gmem.tile(kb["m_indices"], r0, shape=(rows,), name="v_rows"), g.lt, tv=tv, type=ints,
                            name="v_index")]
    local0, count = masked_rows
    m_max = b.gtensor.dim(kb["m_window"], mode=0, name="v_m_max")
    origin = b.arith.add(b.arith.add(local0, g.row_off, name="v_local"),
                         b.arith.sub(m_max, count, name="v_spare"), name="v_origin")
    window = b.gmem.tile(kb["m_window"], origin, shape=(rows,), name="v_rows")
    return [b.gmem.load(window, g.lt, tv=tv, type=ints, other=0, name="v_other0"),
            b.gmem.load(window, g.lt, tv=tv, type=ints, other=1, name="v_other1")]


def row_validity(g, tm, masked_rows):
    """The f32 fragment, in the accumulator's shape, that is 1 for this warpgroup's rows that belong to their group
    and 0 for the others (their C rows are written as zeros): contiguous, rows whose ``%m_indices`` is ≥ 0 (min(index
    + 1, 1)); masked, rows below ``%masked_m[group]`` — read through a window of ``%m_window`` (extent M_max) placed so
    that exactly those rows are inside: out of bounds a load gives its ``other``, so 1 - (load other 1 - load other 0)
    is 1 inside, 0 outside."""
    b = g.b
    reads = row_reads(g, tm, masked_rows)
    one = b.const(1, i32, name="v_one")
    if len(reads) == 1:
        valid = b.frag.min(b.frag.add(reads[0], one, name="v_index1"), one, name="v_valid")
    else:
        valid = b.frag.sub(one, b.frag.sub(reads[1], reads[0], name="v_outside"), name="v_valid")
    return b.frag.cast(valid, type=g.acc_t, name="v_valid_f32")


def zero_outside(g, total, reads):
    """``zero_rows_late``: the tile's f32 ``total`` with the values of rows outside their group replaced by 0, from
    ``row_reads``' loads (issued at the tile's start; the comparisons built here, after its last k-tile, so that the
    loads are first waited for there): contiguous, rows whose index is ≥ 0 are kept (for tile row 1 of a
    contiguous GEMM whose ``%m_indices`` is (…, 0, 0, -1, …) at rows 128, 129, 130: rows 128 and 129); masked, rows
    whose two window loads agree (inside the window). One select per value, whatever the total holds there (NaN
    included). Post: ``total`` where ``row_validity`` is 1, else 0."""
    b = g.b
    if len(reads) == 1:
        keep = b.frag.cmp(reads[0], g.c0, pred="ge", name="v_keep")
    else:
        keep = b.frag.cmp(reads[0], reads[1], pred="eq", name="v_keep")
    return b.frag.select(keep, total, g.fzero, name="total_rows")


def scale_fragment(g, kt, tm, tn, group=None, valid=None, masked_rows=None):
    """The f32 fragment, in the accumulator's shape, of the scale each value of this consumer warpgroup's
    accumulator of tile (tm, tn) takes for k-tile ``kt``: row scale × column scale (0 outside the problem); grouped,
    B's scale blocks of ``group`` (its ⌈N/128⌉ rows of ``%col_scales``), the row scales times ``valid``
    (``row_validity``), masked ones from the group's rows (``masked_rows``: the tile's first local row) of A's.
    ``scale_product(g, scale_loads(...), valid, later_blocks(g, tn))`` in one."""
    return scale_product(g, scale_loads(g, kt, tm, tn, group, masked_rows), valid, later_blocks(g, tn))


def scale_loads(g, kt, tm, tn, group=None, masked_rows=None, tag=""):
    """The loads of ``scale_fragment``'s factors for k-tile ``kt``, nothing computed from them: [the row scales,
    then the column scales' parts] (one part, or one per window of a straddling tile), each an f32 fragment in the
    accumulator's shape (values named ``…{tag}``). A k-tile past the scales' end loads zeros (the windows' bounds),
    so a caller may load k-tile ``hi`` ahead of the last one."""
    b, kb, config = g.b, g.kb, g.config
    rows, bn = config.rows, config.bn
    acc_t = g.acc_t
    r0 = b.arith.add(b.arith.mul(tm, g.c_bm, name=f"sc_m0{tag}"), g.row_off, name=f"sc_r0{tag}")
    n0 = b.arith.mul(tn, g.c_bn, name=f"sc_n0{tag}")
    c_block = b.const(SCALE_BLOCK, i32, name=f"sc_block{tag}")
    if config.swap_ab:
        row_block = b.arith.div(r0, c_block, name=f"sc_rb{tag}")
        window = b.gmem.tile(kb["row_scales"], row_block, kt, shape=(1, 1), name=f"sc_rows{tag}")
        row = b.gmem.load(window, g.lt, tv=uniform_tv(rows, bn), type=acc_t, name=f"sc_row{tag}")
        window = b.gmem.tile(kb["col_scales"], n0, kt, shape=(bn, 1), name=f"sc_cols{tag}")
        return [row, b.gmem.load(window, g.lt, tv=column_tv(rows, bn), type=acc_t, name=f"sc_col{tag}")]
    if masked_rows is not None:
        local = b.arith.add(masked_rows[0], g.row_off, name=f"sc_local{tag}")
        window = b.gmem.tile(kb["row_scales"], group, local, kt, shape=(1, rows, 1), name=f"sc_rows{tag}")
    else:
        window = b.gmem.tile(kb["row_scales"], r0, kt, shape=(rows, 1), name=f"sc_rows{tag}")
    row = b.gmem.load(window, g.lt, tv=row_tv(rows, bn), type=acc_t, name=f"sc_row{tag}")
    return [row] + _column_loads(g, kt, n0, c_block, group, rows, acc_t, tag)


def _column_loads(g, kt, n0, c_block, group, rows, acc_t, tag):
    """``scale_loads``' column parts (unswapped) for an accumulator of ``rows`` rows and type ``acc_t``, of the tile
    whose first column is ``n0`` (``c_block``: the constant 128): B's scale of the tile's block, its blocks (BN a
    multiple of 128) or one part per window of a straddling tile."""
    b, kb, config = g.b, g.kb, g.config
    bn = config.bn
    col_block = b.arith.div(n0, c_block, name=f"sc_nb{tag}")
    if group is not None:
        blocks = b.arith.cdiv(kb["n"], c_block, name=f"sc_blocks{tag}")
        col_block = b.arith.add(b.arith.mul(group, blocks, name=f"sc_group_nb{tag}"), col_block,
                                name=f"sc_nb_grouped{tag}")
    if not straddles(config):
        if bn % SCALE_BLOCK:
            window = b.gmem.tile(kb["col_scales"], col_block, kt, shape=(1, 1), name=f"sc_cols{tag}")
            col = b.gmem.load(window, g.lt, tv=uniform_tv(rows, bn), type=acc_t, name=f"sc_col{tag}")
        else:
            window = b.gmem.tile(kb["col_scales"], col_block, kt, shape=(bn // SCALE_BLOCK, 1), name=f"sc_cols{tag}")
            col = b.gmem.load(window, g.lt, tv=column_block_tv(rows, bn), type=acc_t, name=f"sc_col{tag}")
        return [col]
    parts = []
    for i in range(column_windows(bn)):
        block_i = b.arith.add(col_block, b.const(i, i32, name=f"sc_i{i}{tag}"), name=f"sc_nb{i}{tag}") if i \
            else col_block
        window = b.gmem.tile(kb["col_scales"], block_i, kt, shape=(1, 1), name=f"sc_cols{i}{tag}")
        parts.append(b.gmem.load(window, g.lt, tv=uniform_tv(rows, bn), type=acc_t, name=f"sc_col{i}{tag}"))
    return parts


def row_block_scale_loads(g, kt, tm, tn, tag=""):
    """``row_blocks_in_turn`` with scales from global memory: k-tile ``kt``'s factors for this warpgroup's two 64-row
    blocks of tile (tm, tn), nothing computed from them, in the shape of one chunk (``g.chunk_t``): ([row block 0's
    row scales, row block 1's], [the column parts, shared by both blocks]); a k-tile past the scales' end loads
    zeros. E.g. BM = 256, warpgroup 1 of tile row 2: rows 512 + 128 … 512 + 191, then 512 + 192 … 512 + 255."""
    b, kb = g.b, g.kb
    rows, chunk_t, bn = g.chunk_rows, g.chunk_t, g.config.bn
    r0 = b.arith.add(b.arith.mul(tm, g.c_bm, name=f"rb_m0{tag}"), g.row_off, name=f"rb_r0{tag}")
    n0 = b.arith.mul(tn, g.c_bn, name=f"sc_n0{tag}")
    c_block = b.const(SCALE_BLOCK, i32, name=f"sc_block{tag}")
    row_parts = []
    for r in range(g.config.rows // rows):
        start = b.arith.add(r0, b.const(r * rows, i32, name=f"rb_off{r}{tag}"), name=f"rb_start{r}{tag}") if r \
            else r0
        window = b.gmem.tile(kb["row_scales"], start, kt, shape=(rows, 1), name=f"rb_rows{r}{tag}")
        row_parts.append(b.gmem.load(window, g.lt, tv=row_tv(rows, bn), type=chunk_t, name=f"rb_row{r}{tag}"))
    return row_parts, _column_loads(g, kt, n0, c_block, None, rows, chunk_t, tag)


def later_blocks(g, tn, tag=""):
    """Straddling tiles (``straddles``), fragments in the shape of one promoted chunk (``g.chunk_t``): per boundary i = 1 … ``column_windows(BN)`` - 1, which values' columns lie in
    the tile's i-th B scale block or a later one — 8-column group j ≥ 16·i − (n0 % 128)/8 — as a ``Boundary``: the
    f32 ``weight`` (1 there, 0 before), the i1 fragments of the groups that lie there in every tile (``always``:
    j ≥ 16·i) and before it in every tile (``never``: j < 16·i − (128 − gcd(BN, 128))/8, n0 % 128 being a multiple
    of the gcd); only the groups between depend on the tile. [] for a tile inside one block."""
    b, config = g.b, g.config
    rows, bn = g.chunk_rows, config.bn
    if not straddles(config):
        return []
    n0 = b.arith.mul(tn, g.c_bn, name=f"lb_n0{tag}")
    into = b.arith.div(b.arith.rem(n0, b.const(SCALE_BLOCK, i32, name=f"lb_block{tag}"), name=f"lb_into_cols{tag}"),
                       b.const(8, i32, name=f"lb_c8{tag}"), name=f"lb_into{tag}")
    column_group = b.frag.coords(g.lt, tv=column_group_tv(rows, bn), tile=(bn // 8,), name=f"lb_group_tv{tag}")
    # the same values in the accumulator's flat shape (a whole-fragment slice: no code)
    column_group = b.frag.slice(column_group, offset=0, type=frag("i32", g.chunk_t.shape), name=f"lb_group{tag}")
    one = b.frag.splat(b.const(1.0, f32, name=f"lb_one{tag}"), type=g.chunk_t, name=f"lb_ones{tag}")
    zero = b.frag.splat(g.fzero, type=g.chunk_t, name=f"lb_zeros{tag}")
    most_into = (SCALE_BLOCK - math.gcd(bn, SCALE_BLOCK)) // 8
    boundaries = []
    for i in range(1, column_windows(bn)):
        edge = GROUPS * i
        boundary = b.arith.sub(b.const(edge, i32, name=f"lb_edge{i}{tag}"), into, name=f"lb_boundary{i}{tag}")
        later = b.frag.cmp(column_group, boundary, pred="ge", name=f"lb_later{i}{tag}")
        always = b.frag.cmp(column_group, b.const(edge, i32, name=f"lb_always_edge{i}{tag}"), pred="ge",
                            name=f"lb_always{i}{tag}")
        never = b.frag.cmp(column_group, b.const(edge - most_into, i32, name=f"lb_never_edge{i}{tag}"), pred="lt",
                           name=f"lb_never{i}{tag}")
        weight = b.frag.select(later, one, zero, name=f"lb_weight{i}{tag}")
        boundaries.append(Boundary(weight, always, never))
    return boundaries


class Boundary(NamedTuple):
    """One B scale block boundary inside a straddling tile (``later_blocks``): ``weight`` (f32 1 / 0: the value's
    column lies at / past it), ``always`` / ``never`` (i1: in every tile at / past it, before it)."""
    weight: object
    always: object
    never: object


def scale_product(g, loads, valid=None, later=(), tag=""):
    """The scale fragment from ``scale_loads``' [row scales, column scales of the tile's first block, of its next
    ones…]: (row · ``valid``) × each value's column scale, that of the last block whose ``later_blocks`` mask holds
    (``later``; the first block's where none does). ``pick_scale(g, scale_factors(…), later)`` in one."""
    return pick_scale(g, scale_factors(g, loads, valid, tag), later, tag)


def scale_factors(g, loads, valid=None, tag=""):
    """(row · ``valid``) × the scale of each B block the tile touches: one fragment per block, whose values are few
    distinct registers (2 rows × 1 block: 2); the multiplies a promotion can do as soon as its scales have arrived."""
    b = g.b
    row, parts = loads[0], loads[1:]
    if valid is not None:
        row = b.frag.mul(row, valid, name=f"sc_row_valid{tag}")
    if len(parts) == 1:
        return [b.frag.mul(row, parts[0], name=f"scale{tag}")]
    return [b.frag.mul(row, part, name=f"sc_factor{i}{tag}") for i, part in enumerate(parts)]


def pick_scale(g, factors, later=(), tag=""):
    """Each value's scale: the factor of the last block whose ``later_blocks`` boundary it lies past (the first's
    where none). The groups on a fixed side of a boundary take their factor directly; the others take
    previous + weight · (factor − previous), one FMA per (row, 8-column group) from a tile-constant weight — not a
    select on a per-group predicate, of which a 160-wide tile has more than the warp's predicate registers (ptxas
    then moves them through general registers in every k-tile). Exact where the weight is 0; within an ulp of the
    factor where it is 1."""
    b = g.b
    scale = factors[0]
    for i, (factor, boundary) in enumerate(zip(factors[1:], later), 1):
        name = f"scale{tag}" if i == len(factors) - 1 else f"sc_pick{i}{tag}"
        step = b.frag.fma(boundary.weight, b.frag.sub(factor, scale, name=f"sc_step{i}{tag}"), scale,
                          name=f"sc_blend{i}{tag}")
        scale = b.frag.select(boundary.always, factor,
                              b.frag.select(boundary.never, scale, step, name=f"sc_fixed{i}{tag}"), name=name)
    return scale


def promote_late(g, chunk, loads, later, total, tag=""):
    """total + (chunk × column scale) × row scale (``late_scales``): both operations read the waited chunk, so no
    instruction that reads a scale load can be scheduled before the k-tile's wgmmas are issued — ptxas puts the
    scale product of ``scale_product`` there, where it waits for the loads (an L2 round trip per k-tile) — and the
    loads' latency hides behind the wgmmas. One more multiply per accumulator value than one FMA by the product. A
    straddling tile's per-column pick (a select of loaded values) may still be placed early. Row validity (grouped) is
    not applied here: the caller multiplies the final total by it once."""
    b = g.b
    row, parts = loads[0], loads[1:]
    column = b.frag.mul(chunk, pick_scale(g, parts, later, f"_col{tag}"), name=f"chunk_col{tag}")
    return b.frag.fma(column, row, total, name=f"total_out{tag}")


# -- scales_smem: the scales travel with the pipeline's stages ---------------------------------------------------------

def alloc_scale_rings(g):
    """``scales_smem``: the rings the producer's TMA fills per stage, ``g.s_rows`` (the ``row_scale_box``) and
    ``g.s_cols`` (the ``col_scale_box``), each box in a slot of ``GemmConfig.scale_slot_bytes`` per stage, so that
    every stage starts 128-byte aligned as TMA's destinations must: unswapped ((1, BM) in BM · 4 bytes, (W, 4) in
    ``B_SCALE_SLOT``), swapped ((BM/128, 4) in ``B_SCALE_SLOT``, (1, BN) in BN · 4 rounded up to 128)."""
    b, config = g.b, g.config
    row_slot, col_slot = config.scale_slot_bytes()

    def ring(box, slot):
        return smem("f32", lc.Layout(box.shape + (config.stages,), box.stride + (slot // 4,)))

    g.s_rows = b.smem.alloc(type=ring(row_scale_box(config), row_slot), align=128, name="s_rows")
    g.s_cols = b.smem.alloc(type=ring(col_scale_box(config), col_slot), align=128, name="s_cols")


def box_k_start(b, kt, tag=""):
    """The first k-block of k-tile ``kt``'s B scale box: 4·⌊kt/4⌋ (kt ≥ 0), a 16-byte aligned f32 start along the
    contiguous mode of ``%col_scales`` — a box starting at kt itself (4·kt bytes into the row) faults on the GPU."""
    c_blocks = b.const(B_BOX_K_BLOCKS, i32, name=f"ps_box_k{tag}")
    return b.arith.mul(b.arith.div(kt, c_blocks, name=f"ps_kq{tag}"), c_blocks, name=f"ps_k0{tag}")


def box_k_column(b, kt, tag=""):
    """The column of k-tile ``kt``'s k-block in its B scale box (``box_k_start``): kt mod 4 (kt ≥ 0)."""
    return b.arith.rem(kt, b.const(B_BOX_K_BLOCKS, i32, name=f"ss_box_k{tag}"), name=f"ss_kcol{tag}")


def load_stage_scales(g, s, kt, m0, tn, group=None, tag="", local_row=None):
    """``scales_smem``, in the producer: the TMA loads of k-tile ``kt``'s scales into stage ``s`` on the stage's
    barrier — A's rows m0 … m0+BM-1 from (kt, m0) of ``%row_scales`` (m0 a multiple of BM: a 16-byte aligned start;
    masked: the group's rows ``local_row`` … from (group·⌈K/128⌉ + kt, local_row))
    and B's blocks n0/128 … (plus the group's ⌈N/128⌉·group) from (block, ``box_k_start(kt)``) of ``%col_scales``;
    swapped (``swap_ab``), B's blocks m0/128 … of the kernel's rows from (m0/128, ``box_k_start(kt)``) of
    ``%row_scales`` and A's tokens n0 … n0+BN-1 of its columns from (kt, n0) of ``%col_scales``.
    Rows and blocks past the problem arrive as TMA's zeros."""
    b, kb, config = g.b, g.kb, g.config
    rows_dst = b.smem.slice(g.s_rows, s, name=f"s_rows_dst{tag}")
    cols_dst = b.smem.slice(g.s_cols, s, name=f"s_cols_dst{tag}")
    c_block = b.const(SCALE_BLOCK, i32, name=f"ps_block{tag}")
    if config.swap_ab:
        row_block = b.arith.div(m0, c_block, name=f"ps_mb{tag}")
        b.tma.load(kb["row_scales"], rows_dst, g.pipe, s, row_block, box_k_start(b, kt, tag))
        b.tma.load(kb["col_scales"], cols_dst, g.pipe, s, kt, b.arith.mul(tn, g.c_bn, name=f"ps_n0{tag}"))
        return
    col_block = b.arith.div(b.arith.mul(tn, g.c_bn, name=f"ps_n0{tag}"), c_block, name=f"ps_nb{tag}")
    if group is not None:
        blocks = b.arith.cdiv(kb["n"], c_block, name=f"ps_blocks{tag}")
        col_block = b.arith.add(b.arith.mul(group, blocks, name=f"ps_group_nb{tag}"), col_block,
                                name=f"ps_nb_grouped{tag}")
    if config.grouped == "masked":
        k_blocks = b.arith.cdiv(kb["k"], c_block, name=f"ps_kblocks{tag}")
        row = b.arith.add(b.arith.mul(group, k_blocks, name=f"ps_group_kb{tag}"), kt, name=f"ps_row_kb{tag}")
        b.tma.load(kb["row_scales"], rows_dst, g.pipe, s, row, local_row)
    else:
        b.tma.load(kb["row_scales"], rows_dst, g.pipe, s, kt, m0)
    b.tma.load(kb["col_scales"], cols_dst, g.pipe, s, col_block, box_k_start(b, kt, tag))


def accumulator_rows_tv(rows: int, bn: int):
    """Thread t, value v of a warpgroup's (rows, BN) wgmma accumulator → its ROW, derived from layoutc's accumulator
    TV layout (``layoutc.hopper.wgmma_accumulator_tv(rows, BN)``: (t, v) → m + rows·n) by keeping the strides below
    ``rows`` (the row part) and zeroing the others (multiples of rows: the column part). Equal to ``row_tv``:
    ``accumulator_rows_tv(64, 16)`` = ((4,8,4),(2,2,2)):((0,1,16),(0,8,0)). Post: (t, v) ↦ the row of the
    accumulator element that thread t's value v holds."""
    acc = wgmma_accumulator_tv(rows, bn)

    def row_part(stride):
        if isinstance(stride, tuple):
            return tuple(row_part(x) for x in stride)
        assert stride < rows or stride % rows == 0, (stride, rows)
        return stride if stride < rows else 0

    return lc.Layout(acc.shape, row_part(acc.stride))


def stage_scale_loads(g, s2, kt, tag=""):
    """``scales_smem``, in a consumer: ``scale_loads``' factors of k-tile ``kt`` read from its stage ``s2`` (which
    the caller waited for and has not released) with ld.shared: [this warpgroup's row scales through ``row_tv`` (2
    rows per thread per m64 block: ``accumulator_rows_tv``), then B's scale(s) as ``scale_loads`` gives them (one
    part, or one per window of a straddling tile) from the box's column ``box_k_column(kt)``]. Swapped
    (``swap_ab``): [the B block of this warpgroup's rows (cw·rows/128 of the stage's BM/128) at column
    ``box_k_column(kt)``, one value for every (thread, value); A's per-token scales of the tile's BN columns through
    ``column_tv``]."""
    b, config = g.b, g.config
    rows, bn, acc_t = config.rows, config.bn, g.acc_t
    if config.swap_ab:
        return _swapped_stage_scale_loads(g, s2, kt, tag)
    stage_rows = b.smem.slice(g.s_rows, s2, name=f"ss_rows_stage{tag}")
    mine = b.smem.tile(stage_rows, g.cw, mode=1, size=rows, name=f"ss_rows{tag}")
    row = b.smem.load(mine, g.lt, tv=accumulator_rows_tv(rows, bn), type=acc_t, name=f"ss_row{tag}")
    return [row] + _stage_column_loads(g, s2, kt, rows, acc_t, tag)


def row_block_stage_scales(g, s2, kt, tag=""):
    """``row_blocks_in_turn`` with ``scales_smem``: k-tile ``kt``'s factors read from its stage ``s2`` for this
    warpgroup's two 64-row blocks, in the shape of one chunk (``g.chunk_t``): ([row block 0's row scales (its 64 of
    the stage's BM: entries 128·cw … 128·cw + 63), row block 1's (128·cw + 64 …)], [the column parts, shared by
    both blocks])."""
    b, config = g.b, g.config
    rows, chunk_t = g.chunk_rows, g.chunk_t
    blocks = config.rows // rows
    stage_rows = b.smem.slice(g.s_rows, s2, name=f"rb_rows_stage{tag}")
    first = b.arith.mul(g.cw, b.const(blocks, i32, name=f"rb_blocks{tag}"), name=f"rb_first{tag}")
    row_parts = []
    for r in range(blocks):
        index = b.arith.add(first, b.const(r, i32, name=f"rb_r{r}{tag}"), name=f"rb_block{r}{tag}") if r else first
        mine = b.smem.tile(stage_rows, index, mode=1, size=rows, name=f"rb_rows{r}{tag}")
        row_parts.append(b.smem.load(mine, g.lt, tv=accumulator_rows_tv(rows, config.bn), type=chunk_t,
                                     name=f"rb_row{r}{tag}"))
    return row_parts, _stage_column_loads(g, s2, kt, rows, chunk_t, tag)


def _stage_column_loads(g, s2, kt, rows, acc_t, tag):
    """``stage_scale_loads``' column parts (unswapped) for an accumulator of ``rows`` rows and type ``acc_t``."""
    b, config = g.b, g.config
    bn = config.bn
    stage_cols = b.smem.slice(g.s_cols, s2, name=f"ss_cols_stage{tag}")
    k_block = b.smem.tile(stage_cols, box_k_column(b, kt, tag), mode=1, size=1, name=f"ss_kblock{tag}")
    if not straddles(config):
        tv = column_block_tv(rows, bn) if bn % SCALE_BLOCK == 0 else uniform_tv(rows, bn)
        return [b.smem.load(k_block, g.lt, tv=tv, type=acc_t, name=f"ss_col{tag}")]
    parts = []
    for i in range(column_blocks(config)):
        block = b.smem.tile(k_block, b.const(i, i32, name=f"ss_i{i}{tag}"), mode=0, size=1, name=f"ss_block{i}{tag}")
        parts.append(b.smem.load(block, g.lt, tv=uniform_tv(rows, bn), type=acc_t, name=f"ss_col{i}{tag}"))
    return parts


def _swapped_stage_scale_loads(g, s2, kt, tag=""):
    """``stage_scale_loads`` swapped: the kernel's rows m0 + cw·rows … lie in one B block (rows ≤ 128 and the
    warpgroup's first row a multiple of rows: block cw·rows/128 of the tile's), read once for the whole accumulator
    (``uniform_tv``); the kernel's columns are tokens n0 + j, column j of the stage's (1, BN) box (``column_tv``)."""
    b, config = g.b, g.config
    rows, bn, acc_t = config.rows, config.bn, g.acc_t
    stage_rows = b.smem.slice(g.s_rows, s2, name=f"ss_rows_stage{tag}")
    k_block = b.smem.tile(stage_rows, box_k_column(b, kt, tag), mode=1, size=1, name=f"ss_kblock{tag}")
    block = b.arith.div(g.row_off, b.const(SCALE_BLOCK, i32, name=f"ss_block{tag}"), name=f"ss_rb{tag}")
    mine = b.smem.tile(k_block, block, mode=0, size=1, name=f"ss_rows{tag}")
    row = b.smem.load(mine, g.lt, tv=uniform_tv(rows, bn), type=acc_t, name=f"ss_row{tag}")
    stage_cols = b.smem.slice(g.s_cols, s2, name=f"ss_cols_stage{tag}")
    return [row, b.smem.load(stage_cols, g.lt, tv=column_tv(rows, bn), type=acc_t, name=f"ss_col{tag}")]
